/**
 * mulberry32: a small seeded PRNG, so a failing randomized test (a crash loop, a kill schedule) can be replayed from
 * its seed. Plain JavaScript: the child processes the tests spawn import it as they are, without TypeScript.
 * @param {number} seed
 * @returns {() => number} numbers in [0, 1)
 */
export function mulberry32(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
