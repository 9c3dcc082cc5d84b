"""Stein control variates: variance reduction and interval coverage over replications, i.i.d. draws and chains.

Three non-Gaussian targets with exact moments and exact draws: the suite's banana (2-D, curved),
the separated mixture (2-D, two modes 8 sds apart, weights 0.3/0.7) and a heavy-tailed, skewed
product ``p(x) ~ prod_k t_5(x_k) (1 + tanh(x_k) / 2)`` (2-D; Student-t(5) tails, so the plain mean of
x^2 has a CLT; drawn exactly by rejection from t_5, moments by quadrature). A plain Student-t would
be too easy: it is a Pearson distribution, whose score is a ratio of polynomials, and x and x^2 are
then exactly Stein images of polynomials of degree 3 and 4 (zero variance); the skew factor breaks that. Functions: each
coordinate's mean and its square (4 functions). Each replication:

* ``iid``: ``--draws`` exact draws;
* ``chain``: 4 independence Metropolis-Hastings chains of ``--draws / 4`` draws started from exact
  draws (stationary). The proposal is a product of Student-t(3) laws centred at the exact mean with
  twice the exact sd per coordinate: it covers both modes of the mixture and the banana's tails, so the
  chains mix, yet every rejection repeats a draw and the draws are autocorrelated. (Random-walk
  chains, the first design, cannot cross between the mixture's modes 8 sds apart: the mode weights of a
  replication were then fixed by its 4 starting points, no within-chain standard error can see that,
  and even the plain mean's intervals covered in 72-81% of replications.)
* ``nuts``: 4 NUTS chains (BlackJAX, ``--warmup`` steps of window adaptation each, then ``--draws / 4``
  draws) started from exact draws: the output a practitioner post-processes. NUTS chains mix slowest where
  the IMH chains mix fastest (the tails). Not run on the mixture, whose modes NUTS cannot cross.

For both kinds of chains the run prints how many replications have a rank-normalised split R-hat
(arviz-stats) above 1.01 on any of the four functions (they are judged with the others), and for NUTS
how many transitions diverged.

``steinax.diagnostics.stein_control_variates`` (``basis="auto"``, ``f`` passed as a function with the target's
log-density, so that its intervals come from simulated estimates over weighted tail draws: see its module
docstring) against the plain mean and its normal interval. Reported
per target, setting and function: the empirical variance reduction (variance of the plain means
over the replications / variance of the control-variate estimates), and the coverage of the 95%
intervals of both (a calibrated interval covers in Binomial(reps, 0.95): its 99% interval is printed).
Replications where the library flags the fit as exact (``cv.exact``: ``f`` in the span of the basis, the
error rounding, the interval a rounding bound) are counted apart, and the control variates' calibration
is judged on the others, against the band for their number.

    python experiments/diagnostics/control_variates_coverage.py [--reps 200] [--draws 1000] [--first-rep 0]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from arviz_stats import rhat

from steinax.diagnostics import stein_control_variates
from steinax.posteriors import get

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import banner, pyplot, save_figure, write_csv_atomically  # noqa: E402

NU = 5.0


def functions(z):
    """The functions whose expectations are estimated: each coordinate and its square, ``[2] -> [4]``."""
    return jnp.concatenate([z, z * z])


def _skewed_t_logp(z):
    return jnp.sum(-0.5 * (NU + 1.0) * jnp.log1p(z * z / NU) + jnp.log1p(0.5 * jnp.tanh(z)))


def _skewed_t_sampler(key, n):
    """Exact draws by rejection from t_5 (acceptance (1 + tanh / 2) / 1.5 per coordinate), [n, 2]."""
    out = []
    for k in jax.random.split(key, 2):
        k1, k2 = jax.random.split(k)
        cand = jax.random.t(k1, NU, (3 * n + 64,))
        keep = jax.random.uniform(k2, cand.shape) * 1.5 < 1.0 + 0.5 * jnp.tanh(cand)
        out.append(cand[jnp.nonzero(keep, size=n)[0]])
    return jnp.stack(out, axis=1)


def _skewed_t_moments():
    from scipy import integrate, stats

    dens = lambda v: stats.t.pdf(v, NU) * (1 + 0.5 * np.tanh(v))  # noqa: E731
    z = integrate.quad(dens, -np.inf, np.inf)[0]
    m1 = integrate.quad(lambda v: v * dens(v), -np.inf, np.inf)[0] / z
    m2 = integrate.quad(lambda v: v * v * dens(v), -np.inf, np.inf)[0] / z
    return np.full(2, m1), np.full(2, m2)


# the Beta-Binomial with a Pareto prior (the heavy-tailed example): BDA's rat-tumour model, Gelman et al.,
# Bayesian Data Analysis (3rd ed.), sec. 5.3: y_j ~ Binomial(n_j, theta_j), theta_j ~ Beta(a, b), p(a, b) ~ (a + b)^(-5/2),
# theta integrated out; on 20 groups of seeded synthetic counts (theta_j ~ Beta(2, 14), as the rat tumours' 0.14)
BB_GROUPS = 20


def _bb_data():
    rng = np.random.default_rng(5)
    trials = rng.integers(15, 50, BB_GROUPS)
    return rng.binomial(trials, rng.beta(2.0, 14.0, BB_GROUPS)), trials


def _bb_logp(z, xp=jnp):
    """log p(z) up to a constant, z = (log(a / b), log(a + b)) (BDA eq. 5.9 with the Jacobian a b): [..., 2] -> [...].

    Each group's ``log B(a + y, b + n - y) - log B(a, b)`` as ``sum_{i<y} log(a + i) + sum_{i<n-y} log(b + i)
    - sum_{i<n} log(a + b + i)``: exact for integer counts, and without the cancellation of ``gammaln`` at the
    large ``a + b`` of the right tail."""
    y, n = _bb_data()
    s = xp.exp(z[..., 1])
    a = s / (1.0 + xp.exp(-z[..., 0]))
    b = s / (1.0 + xp.exp(z[..., 0]))
    i = np.arange(int(n.max()) + 1)

    def rising(u, counts):  # [..., groups]: sum_{i < count} log(u + i)
        mask = i[None, :] < counts[:, None]  # [groups, max n + 1]
        return xp.log(u[..., None] + i.reshape((1,) * u.ndim + (-1,))) @ mask.T.astype(np.float64 if xp is np else jnp.float32)

    like = xp.sum(rising(a, y) + rising(b, n - y) - rising(a + b, n), axis=-1)
    return like - 2.5 * xp.log(a + b) + xp.log(a) + xp.log(b)


@functools.lru_cache(maxsize=1)
def _bb_grid():
    """The posterior on a fine grid wide enough for its right tail in log(a + b) (density ~ exp(-z_2 / 2) there)."""
    z1 = np.linspace(-5.0, 1.0, 601)
    z2 = np.linspace(-4.0, 70.0, 3701)
    zz = np.stack(np.meshgrid(z1, z2, indexing="ij"), axis=-1)
    lp = _bb_logp(zz, np)
    return z1, z2, zz, lp


@functools.lru_cache(maxsize=1)
def _bb_moments():
    """E z and E z^2 by the trapezoid rule on the grid (a smooth integrand vanishing at the edges: spectrally
    accurate; halving the grid changes them below 1e-9)."""
    from scipy.integrate import trapezoid

    z1, z2, zz, lp = _bb_grid()
    w = np.exp(lp - lp.max())
    integ = lambda f: trapezoid(trapezoid(f * w, z2, axis=1), z1)  # noqa: E731
    mass = integ(1.0)
    m1 = np.array([integ(zz[..., k]) for k in range(2)]) / mass
    m2 = np.array([integ(zz[..., k] ** 2) for k in range(2)]) / mass
    return m1, m2


@functools.lru_cache(maxsize=1)
def _bb_proposal():
    """A Student-t(3) envelope about the mode, 2x the posterior sds, and log M >= max log(p / q) on the grid (with
    0.5 to spare; p / q falls towards every edge: p's tails are exponential or lighter, q's polynomial)."""
    z1, z2, zz, lp = _bb_grid()
    m1, m2 = _bb_moments()
    centre, scale = m1, 2.0 * np.sqrt(m2 - m1**2)
    t = (zz - centre) / scale
    lq = np.sum(-2.0 * np.log1p(t * t / 3.0), axis=-1)
    return centre, scale, float(np.max(lp - lq)) + 0.5


def _bb_sampler(key, n):
    """Exact draws by rejection from the t_3 envelope, [n, 2]; refuses a draw whose p / q exceeds the bound."""
    centre, scale, log_m = _bb_proposal()
    k1, k2 = jax.random.split(key)
    centre, scale = jnp.asarray(centre)[None], jnp.asarray(scale)[None]
    cand = centre + scale * jax.random.t(k1, 3.0, (16 * n + 256, 2))  # about 10% are accepted
    t = (cand - centre) / scale
    lr = _bb_logp(cand) - jnp.sum(-2.0 * jnp.log1p(t * t / 3.0), axis=-1)
    if bool(jnp.any(lr > log_m)):
        raise RuntimeError("the rejection envelope's bound is too small: a draw has p / q above it")
    keep = jnp.log(jax.random.uniform(k2, lr.shape)) < lr - log_m
    if int(jnp.sum(keep)) < n:
        raise RuntimeError("too few accepted candidates; draw more")
    return cand[jnp.nonzero(keep, size=n)[0]].astype(jnp.float32)


def targets():
    """name -> (target, log-density of one point, exact sampler (key, n) -> [n, 2], exact E x [2], exact E x^2 [2])."""
    out = {}
    for name in ("banana", "separated_mixture"):
        post = get(name)
        ref = post.reference()
        out[name] = (post.target, post.target.logdensity, post.exact, ref.mean, ref.sd**2 + ref.mean**2)

    m1, m2 = _skewed_t_moments()
    out["skewed_t5"] = (_skewed_t_logp, _skewed_t_logp, _skewed_t_sampler, m1, m2)
    return out


def get_target(name):
    """One of :func:`targets`, or ``"beta_binomial"`` (its grid, moments and envelope are computed on first use)."""
    if name != "beta_binomial":
        return targets()[name]
    m1, m2 = _bb_moments()
    return (_bb_logp, _bb_logp, _bb_sampler, m1, m2)


def imh_chains(logp, key, starts, draws, centre, scale, nu=3.0):
    """Independence Metropolis-Hastings chains ``[chains, draws, d]`` from ``starts`` ``[chains, d]``, proposal
    ``centre + scale * t_nu`` per coordinate."""
    def log_q(y):
        z = (y - centre) / scale
        return jnp.sum(-0.5 * (nu + 1.0) * jnp.log1p(z * z / nu))

    def one(x0, k):
        def move(carry, kk):
            x, lw = carry  # lw = log p(x) - log q(x)
            k1, k2 = jax.random.split(kk)
            y = centre + scale * jax.random.t(k1, nu, x.shape)
            lwy = logp(y) - log_q(y)
            accept = jnp.log(jax.random.uniform(k2)) < lwy - lw
            x, lw = jnp.where(accept, y, x), jnp.where(accept, lwy, lw)
            return (x, lw), x

        return jax.lax.scan(move, (x0, logp(x0) - log_q(x0)), jax.random.split(k, draws))[1]

    return jax.vmap(one)(starts, jax.random.split(key, starts.shape[0]))


def nuts_chains(logp, key, starts, draws, warmup):
    """NUTS chains ``([chains, draws, d], divergent [chains, draws])`` from ``starts`` ``[chains, d]``: BlackJAX's
    window adaptation (step size and diagonal mass matrix, ``warmup`` steps, target acceptance 0.8) per chain, then
    ``draws`` draws, with whether each transition diverged."""
    import blackjax

    def one(x0, k):
        k1, k2 = jax.random.split(k)
        (state, params), _ = blackjax.window_adaptation(blackjax.nuts, logp).run(k1, x0, num_steps=warmup)
        step = blackjax.nuts(logp, **params).step

        def move(s, kk):
            s, info = step(kk, s)
            return s, (s.position, info.is_divergent)

        return jax.lax.scan(move, state, jax.random.split(k2, draws))[1]

    return jax.vmap(one)(starts, jax.random.split(key, starts.shape[0]))


def plot(rows, out):
    """The variance reductions as horizontal bars (log scale; exact fits drawn at 1e6) with the 10x goal."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 0.5 + 0.16 * len(rows)))
    labels = [f"{r['target']} {r['setting']} {r['function']}" for r in rows]
    ax.barh(range(len(rows)), [min(float(r["variance_reduction"]), 1e6) for r in rows])
    ax.set_xscale("log")
    ax.axvline(10.0, color="C3", ls="--", lw=0.8, label="goal 10x")
    ax.set_yticks(range(len(rows)), labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("variance reduction over the plain mean (empirical, over replications)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, os.path.join(out, "control_variates_coverage.png"))
    print(f"wrote {out}/control_variates_coverage.csv and control_variates_coverage.png")


def merge(paths, out):
    """Concatenate the CSVs of separate runs (``--targets`` split over processes) and redraw the figure."""
    import csv

    rows = [row for path in paths for row in csv.DictReader(open(path))]
    os.makedirs(out, exist_ok=True)
    write_csv_atomically(os.path.join(out, "control_variates_coverage.csv"), rows)
    plot(rows, out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--first-rep", type=int, default=0,
                   help="replication r uses key fold_in(key(7), r) for r = first-rep, ..., first-rep + reps - 1 "
                        "(another block of replications: an independent check of one run)")
    p.add_argument("--targets", nargs="+", default=["skewed_t5", "beta_binomial", "banana", "separated_mixture"])
    p.add_argument("--settings", nargs="+", default=["iid", "chain", "nuts"], choices=["iid", "chain", "nuts"])
    p.add_argument("--warmup", type=int, default=500, help="window-adaptation steps of each NUTS chain")
    p.add_argument("--out", default="docs/experiments/diagnostics")
    p.add_argument("--merge", nargs="+", default=None, metavar="CSV",
                   help="no runs: concatenate these runs' CSVs into --out and redraw the figure")
    a = p.parse_args(argv)
    if a.merge:
        return merge(a.merge, a.out)
    from scipy.stats import binom

    lo, hi = (int(v) for v in binom.interval(0.99, a.reps, 0.95))
    banner("Stein control variates: variance reduction and 95% interval coverage", {
        "targets": a.targets, "functions": "x_1, x_2, x_1^2, x_2^2", "draws per replication": a.draws,
        "replications": a.reps, "settings": "iid: exact draws; chain: 4 independence MH chains (t3 proposal, 2 sds) from exact draws; "
        f"nuts: 4 BlackJAX NUTS chains ({a.warmup} window-adaptation steps) from exact draws, not on the mixture",
        "estimator": "stein_control_variates(basis='auto'): mean, polynomial and polynomial-field bases, cross-fitted over 5 folds; intervals from 2000 estimates simulated with min(4n, 20000) weighted Cauchy tail draws; per function the basis with the shortest simulated interval, its reported errors resampled afresh; chains: the errors times sqrt(n / ESS of f's values)",
        "replication seeds": f"fold_in(key(7), r), r = {a.first_rep}, ..., {a.first_rep + a.reps - 1}",
        "calibrated coverage: covering replications within": f"[{lo}, {hi}] (binomial 99%), among those not exact "
        "(cv.exact: f in the basis' span, a rounding bound; a band for fewer replications is printed with them)"})
    rows = []
    for name in a.targets:
        target, logp, sampler, m1, m2 = get_target(name)
        truth = np.r_[m1, m2]
        # compiled once per target: a fresh trace per replication leaks compiled code until LLVM runs out of memory
        run_chains = jax.jit(lambda k, starts, centre, scale, logp=logp: imh_chains(logp, k, starts, a.draws // 4,
                                                                                    centre, scale))
        run_nuts = jax.jit(lambda k, starts, logp=logp: nuts_chains(logp, k, starts, a.draws // 4, a.warmup))
        for setting in a.settings:
            if setting == "nuts" and name == "separated_mixture":
                print(f"{name:18s} nuts : not run. NUTS cannot cross between modes 8 sds apart: chains started in one "
                      "mode stay there, and where all four start in the same one neither R-hat nor any standard error "
                      "from the chains can see the other (the IMH chains, which cross, test this target)", flush=True)
                continue
            est, lower, upper, plain, plain_se, reported, exact, simulated = [], [], [], [], [], [], [], 0
            rhat_max, divergent = [], 0
            for r in range(a.first_rep, a.first_rep + a.reps):
                key = jax.random.fold_in(jax.random.key(7), r)
                if setting == "iid":
                    x = sampler(key, a.draws)
                else:  # 4 chains from exact starts
                    k1, k2 = jax.random.split(key)
                    sd = np.sqrt(m2 - m1**2)
                    if setting == "chain":
                        x = run_chains(k2, sampler(k1, 4), jnp.asarray(m1, jnp.float32), jnp.asarray(2.0 * sd, jnp.float32))
                    else:
                        x, div = run_nuts(k2, sampler(k1, 4))
                        divergent += int(jnp.sum(div))
                    # rank-normalised split R-hat (Vehtari et al. 2021) of the four functions
                    fx = np.asarray(jax.vmap(jax.vmap(functions))(x), np.float64)
                    rhat_max.append(max(float(rhat(fx[..., j])) for j in range(fx.shape[-1])))
                # f as a function and the target's log-density: the intervals come from tail draws (module docstring)
                cv = stein_control_variates(x, target, functions)
                est.append(np.asarray(cv.estimate))
                lower.append(np.asarray(cv.interval()[0]))
                upper.append(np.asarray(cv.interval()[1]))
                simulated += cv.error_draws is not None
                reported.append(np.asarray(cv.variance_reduction))
                exact.append(np.asarray(cv.exact))
                plain.append(np.asarray(cv.mean))
                plain_se.append(np.asarray(cv.mean_standard_error))
            est, lower, upper, plain, plain_se, reported = (np.array(v, np.float64)
                                                            for v in (est, lower, upper, plain, plain_se, reported))
            exact = np.array(exact, bool)
            flagged = "" if setting == "iid" else (f"; R-hat > 1.01 in {int(np.sum(np.array(rhat_max) > 1.01))} (max "
                                                   f"{max(rhat_max):.3f}; judged with the others)")
            if setting == "nuts":
                flagged += f"; divergent transitions: {divergent} of {a.reps * 4 * (a.draws // 4)}"
            print(f"{name:18s} {setting:5s}: intervals from tail draws in {simulated} of {a.reps} replications{flagged}",
                  flush=True)
            for j, fname in enumerate(["x1", "x2", "x1^2", "x2^2"]):
                covers = (lower[:, j] <= truth[j]) & (truth[j] <= upper[:, j])
                cover_plain = int(np.sum(np.abs(plain[:, j] - truth[j]) <= 1.96 * plain_se[:, j]))
                reduction = np.var(plain[:, j]) / max(np.var(est[:, j]), 1e-300)
                # an exact fit (cv.exact: f in the basis' span) has a rounding error and a rounding bound, not a
                # confidence interval: calibration is judged on the other replications, against their own band
                n_stat, cover = int(np.sum(~exact[:, j])), int(np.sum(covers[~exact[:, j]]))
                n_exact, cover_exact = a.reps - n_stat, int(np.sum(covers[exact[:, j]]))
                b_lo, b_hi = (int(v) for v in binom.interval(0.99, n_stat, 0.95)) if n_stat else (0, 0)
                rows.append({"target": name, "setting": setting, "function": fname, "reps": a.reps,
                             "variance_reduction": reduction, "reported_reduction": float(np.median(reported[:, j])),
                             "cv_covered": cover, "statistical_reps": n_stat, "band_lo": b_lo, "band_hi": b_hi,
                             "exact_reps": n_exact, "exact_covered": cover_exact, "mean_covered": cover_plain,
                             "cv_rmse": float(np.sqrt(np.mean((est[:, j] - truth[j]) ** 2))),
                             "mean_rmse": float(np.sqrt(np.mean((plain[:, j] - truth[j]) ** 2)))})
                if n_stat:
                    ok = "ok" if b_lo <= cover <= b_hi else "OUT"
                    band = "" if n_stat == a.reps else f", band [{b_lo}, {b_hi}]"
                    shown = f"coverage CV {cover}/{n_stat} ({ok}{band})"
                else:
                    shown = "coverage CV: none statistical"
                if n_exact:
                    shown += f"; exact in {n_exact} (rounding bounds covering {cover_exact})"
                vr = f"{reduction:8.3g}" if reduction < 1e6 else "    >1e6"
                print(f"{name:18s} {setting:5s} {fname:5s}: variance / {vr} (reported, median: "
                      f"{np.median(reported[:, j]):.3g}); {shown}; plain mean {cover_plain}/{a.reps}", flush=True)
            os.makedirs(a.out, exist_ok=True)  # the rows so far, after every target and setting
            write_csv_atomically(os.path.join(a.out, "control_variates_coverage.csv"), rows)
    plot(rows, a.out)


if __name__ == "__main__":
    main()
