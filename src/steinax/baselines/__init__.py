"""Baselines: the samplers and approximations the particle methods are compared with, on the same steinax targets.

* :mod:`steinax.baselines.mcmc`: SGLD and pSGLD (BlackJAX's step; pSGLD's preconditioned step) and NUTS (NumPyro);
* :mod:`steinax.baselines.nutpie`: nutpie (NUTS with its own mass-matrix adaptation, and its normalizing-flow
  adaptation) on a steinax target;
* :mod:`steinax.baselines.vi`: Gaussian variational inference (full-rank and mean-field).

MAP ascent runs in the particle loop: :func:`steinax.map_ascent`. The modules import their optional dependencies
(``steinax[bench]``) when used; ``import steinax.mcmc`` and
``import steinax.vi`` are aliases of them.
"""
