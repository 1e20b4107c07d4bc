// Delta debugging over a failing schedule's steps (Tests/web/engine-live.test.mjs): steps are
// left out in halves, quarters, … down to single steps while the schedule still fails. Each
// step is self-contained (its own parameters, drawn when the plan was made), so a plan with
// steps left out still runs; real time makes a run not exactly repeatable, so the caller's
// `fails` should count a candidate as failing if it fails in any of a few tries.

/**
 * The smallest failing sub-list of `steps` found: `fails(candidate)` (async, true when the
 * candidate still fails) is asked about complements of chunks, ddmin style. Stops at
 * `deadline` (a Date.now() value) or after `maxTries` candidates. Resolves with
 * { steps, tries, complete } (complete: no single step can be left out).
 */
export async function shrink(steps, fails, { deadline = Infinity, maxTries = Infinity, log = () => {} } = {}) {
  let current = [...steps];
  let parts = 2;
  let tries = 0;
  const out = (complete) => ({ steps: current, tries, complete });
  while (current.length > 1) {
    const size = Math.ceil(current.length / parts);
    let reduced = false;
    for (let start = 0; start < current.length; start += size) {
      if (Date.now() >= deadline || tries >= maxTries) return out(false);
      const candidate = [...current.slice(0, start), ...current.slice(start + size)];
      tries++;
      if (await fails(candidate)) {
        log(`shrunk to ${candidate.length} steps (without ${start}..${start + size - 1})`);
        current = candidate;
        parts = Math.max(parts - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (size === 1) return out(true);
      parts = Math.min(parts * 2, current.length);
    }
  }
  if (current.length === 1 && Date.now() < deadline && tries < maxTries) {
    tries++;
    if (await fails([])) current = [];
  }
  return out(true);
}
