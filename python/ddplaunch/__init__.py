"""ddplaunch: a native launcher for distributed data-parallel training (a drop-in for torchrun).

The package holds no Python API: ``pip install`` puts the ``ddplaunch`` and ``ddplaunch-store``
executables in the environment's ``bin/``, and ``python -m ddplaunch`` runs the first of them.
"""

__version__ = "0.1.0"
