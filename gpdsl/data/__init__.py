"""A model's data: reading it (:mod:`~gpdsl.data.io`), validating it against the model's declarations
(:mod:`~gpdsl.data.validation`), and what a run must satisfy before it starts (:mod:`~gpdsl.data.preflight`)."""
