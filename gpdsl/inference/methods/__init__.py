"""One module per inference method of gpdsl's engines: its settings class and its run function.

The modules import JAX only inside their run functions, so the command line can build its flags from
the settings classes without starting JAX. The methods are declared in :mod:`gpdsl.registry`.
"""
