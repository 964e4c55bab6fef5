/** The part of npm's cacache (a devDependency, the benchmark's peer) that the benchmark calls. */
declare module 'cacache' {
  export function put(cache: string, key: string, data: Uint8Array): Promise<unknown>;
  export function get(cache: string, key: string): Promise<{ data: Buffer; size: number; integrity: string }>;
}
