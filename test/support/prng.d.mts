/** mulberry32: a small seeded PRNG (numbers in [0, 1)), replayable from its seed. */
export declare function mulberry32(seed: number): () => number;
