"""Draw the method pages' figures into docs/figures/ (committed; rerun after changing a method).

    python docs/make_figures.py

Settings are printed beside each figure's name.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp

import steinax
from steinax.interfaces.plot import _pyplot, plot_particles, plot_trace, save_figure

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")


def _run(method, target, n, steps, seed=0, lr=0.05):
    x0 = jax.random.normal(jax.random.key(seed), (n, 2))
    return x0, steinax.run(method, target, x0, steps=steps, optimizer=steinax.adagrad_momentum(lr),
                           rng_key=jax.random.key(seed + 1), progress=False)


def main():
    plt = _pyplot()
    panels = [
        ("svgd_star", "SVGD", steinax.svgd(), "star", steinax.targets.star(), (-3.5, 3.5, -3.5, 3.5),
         "RBF, Liu's median"),
        ("mk_svgd_banana", "MK-SVGD", steinax.mk_svgd(), "double banana", steinax.targets.DoubleBanana(), (-2, 2, -1, 3),
         "10 RBF, h = 2^-4..2^5, eq. 21"),
    ]
    for stem, name, method, target_name, target, extent, kernel in panels:
        x0, res = _run(method, target, 200, 1000)
        title = f"{name}, {target_name}, 200 particles, 1000 steps"
        save_figure(plot_particles(res.particles, target, extent=extent, initial=x0, title=title),
                    os.path.join(OUT, f"{stem}.png"))
        save_figure(plot_trace(res), os.path.join(OUT, f"{stem}_trace.png"))
        print(f"{stem}.png, {stem}_trace.png: {name} ({kernel}), AdaGrad-momentum 0.05, 200 particles, 1000 steps")

    corr = steinax.targets.Gaussian(jnp.zeros(2), jnp.array([[1.0, 0.9], [0.9, 1.0]]))
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8))
    for ax, (name, method) in zip(axes, [("SVGD", steinax.svgd()), ("CC-SVGD", steinax.cc_svgd())]):
        _, res = _run(method, corr, 200, 1000)
        plot_particles(res.particles, corr, extent=(-3.5, 3.5, -3.5, 3.5), ax=ax,
                       title=f"{name}, rho = 0.9, KSD {float(res.trace.ksd[-1]):.3g}")
    fig.tight_layout()
    save_figure(fig, os.path.join(OUT, "cc_svgd_gaussian.png"))
    print("cc_svgd_gaussian.png: SVGD vs CC-SVGD on N(0, [[1, .9], [.9, 1]]), 200 particles, 1000 steps")


if __name__ == "__main__":
    main()
