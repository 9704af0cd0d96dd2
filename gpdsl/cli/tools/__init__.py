"""Commands of one method (``gpdsl pm-variance``): each module has ``NAME``, ``HELP``, ``EXAMPLE``,
``add_arguments(parser)`` and ``run(args) -> exit status``; a method's registry entry names its tools' modules in
``tools``, and the command line adds one command for each."""
