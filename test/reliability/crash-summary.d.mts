export declare const SESSIONS: number;
export declare function crashSummary(
  marker: string,
  size: number,
): { task: string; state: string; nextSteps: string[]; notes: string };
