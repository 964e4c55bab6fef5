/**
 * Renders test/RELIABILITY.md from the figures each reliability suite recorded on its last run
 * (test/reliability/figures/<suite>.json). The table is never edited by hand: every number in it was
 * counted by a test that would have failed had a loss or a wrong answer occurred.
 */

/** What one reliability suite counted on its last run. */
export interface SuiteFigures {
  suite: string;
  /** One line saying what the suite does to the store. */
  title: string;
  mode: 'standard' | 'soak';
  finishedAt: string;
  durationMs: number;
  /** SIGKILLs survived (crash suite). */
  kills?: number;
  /** Faults injected, per step of the publish path (fault suite). */
  faultsPerStep?: Record<string, number>;
  /** Inputs tried, per target (hostile-input and filesystem-attack suites). */
  inputs?: Record<string, number>;
  /** Acknowledged publishes missing afterwards. Must be 0. */
  losses: number;
  /** Results that were returned but wrong (content, id, a forged or half-published entry). Must be 0. */
  wrongAnswers: number;
  /** Further counters worth reading (typed errors by code, recovery figures, timings). */
  details?: Record<string, number | string>;
}

const sum = (r: Record<string, number> | undefined): number => Object.values(r ?? {}).reduce((a, b) => a + b, 0);
const fmt = (n: number): string => n.toLocaleString('en-US');

/** The markdown text of test/RELIABILITY.md for these figures. */
export function renderReport(figures: SuiteFigures[]): string {
  const soakLast = (f: SuiteFigures) => (f.mode === 'soak' ? 1 : 0);
  const rows = [...figures].sort((a, b) => a.suite.localeCompare(b.suite) || soakLast(a) - soakLast(b));
  const out: string[] = [
    '# Reliability figures',
    '',
    'Written by `test/reliability/*.test.ts` at the end of their last run (`npm test`; `npm run test:soak` for the',
    'long variants: 2,000 kills, every errno at every call site, 10× the property runs). Do not edit by hand.',
    'Losses and wrong answers must be 0 — every check that counts one also fails its test, so a non-zero figure',
    'here means the run that wrote it failed. Replay a crash run with `HANDOFF_LEDGER_CRASH_SEED=<seed>` (the seed',
    'is in the crash section below).',
    '',
    '| suite | mode | kills survived | faults injected | inputs tried | losses | wrong answers | run at | time |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |',
  ];
  for (const f of rows) {
    out.push(
      `| ${f.suite} | ${f.mode} | ${f.kills === undefined ? '—' : fmt(f.kills)} | ${f.faultsPerStep ? fmt(sum(f.faultsPerStep)) : '—'} | ` +
        `${f.inputs ? fmt(sum(f.inputs)) : '—'} | ${fmt(f.losses)} | ${fmt(f.wrongAnswers)} | ${f.finishedAt} | ${(f.durationMs / 1000).toFixed(1)} s |`,
    );
  }
  for (const mode of ['standard', 'soak'] as const) {
    const of = rows.filter((f) => f.mode === mode);
    if (of.length === 0) continue;
    const total = (pick: (f: SuiteFigures) => number) => fmt(of.reduce((a, f) => a + pick(f), 0));
    out.push(
      `| **total** | ${mode} | ${total((f) => f.kills ?? 0)} | ${total((f) => sum(f.faultsPerStep))} | ${total((f) => sum(f.inputs))} | ` +
        `${total((f) => f.losses)} | ${total((f) => f.wrongAnswers)} | | |`,
    );
  }
  out.push('');
  const faultRuns = rows.filter((f) => f.faultsPerStep);
  if (faultRuns.length > 0) {
    const steps = [...new Set(faultRuns.flatMap((f) => Object.keys(f.faultsPerStep!)))].sort();
    out.push(
      '### Faults injected per step',
      '',
      `| step (FsOps call or LevelDB commit) | ${faultRuns.map((f) => f.mode).join(' | ')} |`,
      `| --- | ${faultRuns.map(() => '---:').join(' | ')} |`,
    );
    for (const step of steps)
      out.push(`| ${step} | ${faultRuns.map((f) => fmt(f.faultsPerStep![step] ?? 0)).join(' | ')} |`);
    out.push('');
  }
  const inputs: Array<[string, string, number]> = rows.flatMap((f) =>
    Object.entries(f.inputs ?? {}).map(([k, v]) => [`${f.suite} (${f.mode})`, k, v] as [string, string, number]),
  );
  if (inputs.length > 0) {
    out.push('### Inputs tried', '', '| suite | target | inputs |', '| --- | --- | ---: |');
    for (const [suite, k, v] of inputs) out.push(`| ${suite} | ${k} | ${fmt(v)} |`);
    out.push('');
  }
  for (const f of rows) {
    out.push(`## ${f.suite} (${f.mode})`, '', f.title, '');
    for (const [k, v] of Object.entries(f.details ?? {})) out.push(`- ${k}: ${typeof v === 'number' ? fmt(v) : v}`);
    out.push('');
  }
  return out.join('\n');
}
