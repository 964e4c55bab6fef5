/**
 * Telemetry as an operator sees it through the OpenTelemetry SDK's in-memory exporters: the spans and
 * metrics that a publish, a failed publish, a resume and the other operations produce, and the rule that
 * principal and session ids stay out unless the host asks for them.
 */
import {
  context,
  INVALID_SPAN_CONTEXT,
  metrics,
  ProxyTracer,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type HistogramMetricData,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManifestError } from '../manifests/errors.js';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import type { ManifestLog } from '../manifests/log/log.js';
import { openBundleDir } from '../src/ops/bundle-dir.js';
import { auditBundle } from '../src/ops/audit.js';
import { exportBundle } from '../src/ops/export.js';
import { gc } from '../src/ops/maintenance.js';
import { openLedger, type OpenLedgerOptions } from '../src/ledger/open.js';
import { LedgerTelemetry, type IdentifierPolicy } from '../src/telemetry/telemetry.js';
import { sampleSummary, tempDir } from './support/tmp.js';

const scope = { principal: 'alice@example.org', session: 'conversation-4711' };

function sdk() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    tracerProvider,
    meterProvider,
    spans: () => spans.getFinishedSpans(),
    async metrics(): Promise<MetricData[]> {
      await reader.forceFlush();
      return (
        exporter
          .getMetrics()
          .at(-1)
          ?.scopeMetrics.flatMap((s) => s.metrics) ?? []
      );
    },
    /** The instrumentation scopes the metrics were recorded under (call after `metrics()`). */
    metricScopes: () =>
      exporter
        .getMetrics()
        .at(-1)
        ?.scopeMetrics.map((s) => s.scope.name) ?? [],
  };
}

async function ledgerWith(
  telemetry: ReturnType<typeof sdk>,
  identifiers?: IdentifierPolicy,
  extra: Partial<OpenLedgerOptions> = {},
) {
  return openLedger({
    root: join(tempDir(), 'store'),
    host: 'otel-host',
    telemetry: { tracerProvider: telemetry.tracerProvider, meterProvider: telemetry.meterProvider, identifiers },
    ...extra,
  });
}

function metric(all: MetricData[], name: string): MetricData | undefined {
  return all.find((m) => m.descriptor.name === name);
}

/** Every attribute value of every span and metric point, as text. */
function everyValue(spans: ReturnType<ReturnType<typeof sdk>['spans']>, all: MetricData[]): string {
  const values: unknown[] = [];
  for (const s of spans) {
    values.push(s.name, ...Object.values(s.attributes), s.status.message);
    for (const e of s.events) values.push(e.name, ...Object.values(e.attributes ?? {}));
  }
  for (const m of all) for (const p of m.dataPoints) values.push(...Object.values(p.attributes));
  return JSON.stringify(values);
}

describe('telemetry of publish', () => {
  it('records a span with outcome, size and seq, a latency histogram point and the bytes written', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t);
    const receipt = await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
    await ledger.close();
    const [span] = t.spans().filter((s) => s.name === 'handoff_ledger.publish');
    expect(span?.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(span?.attributes).toMatchObject({
      'handoff_ledger.operation': 'publish',
      'handoff_ledger.outcome': 'ok',
      'handoff_ledger.host': 'otel-host',
      'handoff_ledger.summary.bytes': receipt.size,
      'handoff_ledger.seq': 0,
    });
    const all = await t.metrics();
    const duration = metric(all, 'handoff_ledger.publish.duration') as HistogramMetricData;
    expect(duration.dataPointType).toBe(DataPointType.HISTOGRAM);
    expect(duration.descriptor.unit).toBe('s');
    expect(duration.dataPoints).toHaveLength(1);
    expect(duration.dataPoints[0]!.attributes).toEqual({ 'handoff_ledger.outcome': 'ok' });
    expect(duration.dataPoints[0]!.value.count).toBe(1);
    // Buckets for durations in seconds (README's metric table): a publish of milliseconds lands in a bucket that says
    // so, not in the SDK's default first bucket (0, 5] (boundaries meant for milliseconds), where every operation
    // under five seconds would look alike.
    const { boundaries, counts } = duration.dataPoints[0]!.value.buckets;
    expect(boundaries).toEqual([
      0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300,
    ]);
    const seconds = duration.dataPoints[0]!.value.max!;
    expect(counts.findIndex((c) => c === 1)).toBe(boundaries.filter((b) => b < seconds).length);
    const bytes = metric(all, 'handoff_ledger.summary.bytes');
    // README's metric table: a counter, in bytes (By).
    expect([bytes?.dataPointType, bytes?.descriptor.unit]).toEqual([DataPointType.SUM, 'By']);
    expect(bytes?.dataPoints).toEqual([
      expect.objectContaining({ attributes: { 'handoff_ledger.operation': 'publish' }, value: receipt.size }),
    ]);
    expect(metric(all, 'handoff_ledger.failures')?.dataPoints ?? []).toEqual([]);
    // README "Operating it": instrumentation scope handoff-ledger, for spans and metrics alike.
    expect(span?.instrumentationScope.name).toBe('handoff-ledger');
    expect(t.metricScopes()).toEqual(['handoff-ledger']);
  });

  it('records a failed publish: error status, the error code as outcome, and a failure counted by code', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t);
    await expect(ledger.publish({ ...scope, run: 'r1' }, { task: '' })).rejects.toMatchObject({
      code: 'SUMMARY_INVALID',
    });
    await ledger.close();
    const [span] = t.spans();
    expect(span?.name).toBe('handoff_ledger.publish');
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'SUMMARY_INVALID' });
    expect(span?.attributes).toMatchObject({
      'handoff_ledger.outcome': 'SUMMARY_INVALID',
      'error.type': 'SUMMARY_INVALID',
    });
    expect(span?.events.map((e) => e.attributes?.['exception.type'])).toEqual(['SUMMARY_INVALID']);
    expect(span?.events[0]?.attributes?.['exception.message']).toBeUndefined();
    const all = await t.metrics();
    expect(metric(all, 'handoff_ledger.failures')?.dataPoints).toEqual([
      expect.objectContaining({
        attributes: { 'handoff_ledger.operation': 'publish', 'error.type': 'SUMMARY_INVALID' },
        value: 1,
      }),
    ]);
    const duration = metric(all, 'handoff_ledger.publish.duration') as HistogramMetricData;
    expect(duration.dataPoints[0]!.attributes).toEqual({
      'handoff_ledger.outcome': 'SUMMARY_INVALID',
      'error.type': 'SUMMARY_INVALID',
    });
  });

  it('records a publish refused for an option in its scope in its span, the ids named, the option not', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t, 'plain');
    // Spread, as plain JavaScript passes it: the types would refuse the field in an object literal.
    await expect(
      ledger.publish({ ...scope, run: 'r1', ...{ expectedPrev: null } }, sampleSummary()),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await ledger.close();
    const [span] = t.spans();
    expect(span?.name).toBe('handoff_ledger.publish');
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'INVALID_ARGUMENT' });
    expect(span?.attributes).toMatchObject({
      'handoff_ledger.outcome': 'INVALID_ARGUMENT',
      'handoff_ledger.principal': scope.principal,
      'handoff_ledger.session': scope.session,
    });
    expect(Object.keys(span?.attributes ?? {}).filter((k) => /expected/i.test(k))).toEqual([]);
  });

  it('records a call refused because the ledger is closed (CLOSED) as a failure, for every operation', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t);
    await ledger.close();
    const dir = tempDir();
    for (const call of [
      () => ledger.publish({ ...scope, run: 'r1' }, sampleSummary(1)),
      () => ledger.resume(scope),
      () => ledger.history(scope),
      () => gc(ledger, { graceMs: 0 }),
      () => exportBundle(ledger, { out: join(dir, 'bundle') }),
    ])
      await expect(call()).rejects.toMatchObject({ code: 'CLOSED' });
    expect(t.spans().map((span) => `${span.name} ${String(span.attributes['error.type'])}`)).toEqual([
      'handoff_ledger.publish CLOSED',
      'handoff_ledger.resume CLOSED',
      'handoff_ledger.history CLOSED',
      'handoff_ledger.gc CLOSED',
      'handoff_ledger.export CLOSED',
    ]);
    const failures = metric(await t.metrics(), 'handoff_ledger.failures')?.dataPoints ?? [];
    expect(
      failures.map((p) => `${String(p.attributes['handoff_ledger.operation'])} ${String(p.value)}`).sort(),
    ).toEqual(['export 1', 'gc 1', 'history 1', 'publish 1', 'resume 1']);
  });

  it('records checkPublish (what compact asks before the model) as check_publish: a refusal is a failure by code', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t);
    await ledger.checkPublish({ ...scope, run: 'r1' });
    await ledger.revoke(scope.principal, scope.session);
    await expect(ledger.checkPublish({ ...scope, run: 'r1' })).rejects.toMatchObject({ code: 'REVOKED' });
    await ledger.close();
    expect(t.spans().map((s) => [s.name, s.attributes['handoff_ledger.outcome']])).toEqual([
      ['handoff_ledger.check_publish', 'ok'],
      ['handoff_ledger.check_publish', 'REVOKED'],
    ]);
    const all = await t.metrics();
    expect(metric(all, 'handoff_ledger.failures')?.dataPoints).toEqual([
      expect.objectContaining({
        attributes: { 'handoff_ledger.operation': 'check_publish', 'error.type': 'REVOKED' },
        value: 1,
      }),
    ]);
    expect((metric(all, 'handoff_ledger.check_publish.duration') as HistogramMetricData).dataPoints).toHaveLength(2);
  });

  it('counts a retry each time another writer appended first', async () => {
    const t = sdk();
    const root = join(tempDir(), 'store');
    const real = await LevelManifestLog.open(join(root, 'manifests-v1'));
    let conflicts = 2;
    // Two lost races, as when hosts sharing a PostgreSQL store publish to one session at once.
    const log = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop === 'append')
          return async (...args: Parameters<ManifestLog['append']>) => {
            if (conflicts-- > 0) throw new ManifestError('CHAIN_CONFLICT', 'another writer appended first');
            return target.append(...args);
          };
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as ManifestLog;
    const ledger = await ledgerWith(t, undefined, { root, log });
    await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
    await ledger.close();
    const all = await t.metrics();
    expect(metric(all, 'handoff_ledger.chain_conflict.retries')?.dataPoints.map((p) => p.value)).toEqual([2]);
    const [span] = t.spans();
    expect(span?.events.map((e) => e.name)).toEqual([
      'handoff_ledger.chain_conflict.retry',
      'handoff_ledger.chain_conflict.retry',
    ]);
    expect(span?.attributes['handoff_ledger.outcome']).toBe('ok');
  });
});

describe('telemetry of resume, history, export, verify and gc', () => {
  it('records one span per operation, each with its outcome and what it moved', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t);
    const receipt = await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
    expect(await ledger.resume(scope)).toMatchObject({ seq: 0 });
    expect(await ledger.resume({ ...scope, session: 'empty' })).toBeUndefined();
    await ledger.history(scope);
    const out = join(tempDir(), 'bundle');
    await exportBundle(ledger, { out });
    await auditBundle(await openBundleDir(out), {
      trust: ledger.trustStore(),
      telemetry: ledger.telemetry,
    });
    await gc(ledger, { graceMs: 0, dryRun: true });
    await ledger.close();
    const byName = Object.fromEntries(
      t.spans().map((s) => [`${s.name}:${s.attributes['handoff_ledger.found'] ?? ''}`, s]),
    );
    expect(byName['handoff_ledger.resume:true']?.attributes).toMatchObject({
      'handoff_ledger.outcome': 'ok',
      'handoff_ledger.summary.bytes': receipt.size,
      'handoff_ledger.seq': 0,
    });
    expect(byName['handoff_ledger.resume:false']?.attributes['handoff_ledger.outcome']).toBe('ok');
    expect(byName['handoff_ledger.history:']?.attributes['handoff_ledger.manifests']).toBe(1);
    expect(byName['handoff_ledger.export:']?.attributes).toMatchObject({
      'handoff_ledger.manifests': 1,
      'handoff_ledger.chains': 1,
    });
    expect(byName['handoff_ledger.verify:']?.attributes).toMatchObject({
      'handoff_ledger.outcome': 'ok',
      'handoff_ledger.verdict_ok': true,
      'handoff_ledger.findings': 0,
    });
    expect(byName['handoff_ledger.gc:']?.attributes).toMatchObject({
      'handoff_ledger.outcome': 'ok',
      'handoff_ledger.dry_run': true,
    });
    const all = await t.metrics();
    const resume = metric(all, 'handoff_ledger.resume.duration') as HistogramMetricData;
    expect(resume.dataPoints[0]!.value.count).toBe(2);
    for (const op of ['history', 'export', 'verify', 'gc'])
      expect((metric(all, `handoff_ledger.${op}.duration`) as HistogramMetricData).dataPoints[0]!.value.count).toBe(1);
    expect(metric(all, 'handoff_ledger.summary.bytes')?.dataPoints).toContainEqual(
      expect.objectContaining({ attributes: { 'handoff_ledger.operation': 'resume' }, value: receipt.size }),
    );
  });
});

describe('principal and session ids in telemetry', () => {
  async function run(identifiers?: IdentifierPolicy) {
    const t = sdk();
    const ledger = await ledgerWith(t, identifiers);
    await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
    await ledger.publish({ ...scope, run: 'r1' }, { task: '' }).catch(() => {});
    await ledger.resume(scope);
    await ledger.close();
    return { spans: t.spans(), all: await t.metrics() };
  }

  it('are left out by default, from spans, events and metrics alike', async () => {
    const { spans, all } = await run();
    const text = everyValue(spans, all);
    expect(text).not.toContain(scope.principal);
    expect(text).not.toContain(scope.session);
    for (const s of spans) expect(Object.keys(s.attributes).filter((k) => /principal|session/.test(k))).toEqual([]);
  });

  it('are recorded as keyed BLAKE3 hashes when a hash key is given', async () => {
    const hashKey = new Uint8Array(32).fill(7);
    const { spans, all } = await run({ hashKey });
    const hash = (v: string) => bytesToHex(blake3(new TextEncoder().encode(v), { key: hashKey }));
    for (const s of spans)
      expect(s.attributes).toMatchObject({
        'handoff_ledger.principal_hash': hash(scope.principal),
        'handoff_ledger.session_hash': hash(scope.session),
      });
    const text = everyValue(spans, all);
    expect(text).not.toContain(scope.principal);
    expect(text).not.toContain(scope.session);
  });

  it("take a hash key that is another realm's Uint8Array (a vm context's, a test sandbox's): it was INVALID_ARGUMENT", async () => {
    const hashKey = new Uint8Array(32).fill(7);
    const foreign = runInNewContext('new Uint8Array(32).fill(7)') as Uint8Array;
    expect(foreign instanceof Uint8Array).toBe(false);
    const { spans } = await run({ hashKey: foreign });
    const hash = (v: string) => bytesToHex(blake3(new TextEncoder().encode(v), { key: hashKey }));
    expect(spans.length).toBeGreaterThan(0);
    for (const s of spans)
      expect(s.attributes).toMatchObject({
        'handoff_ledger.principal_hash': hash(scope.principal),
        'handoff_ledger.session_hash': hash(scope.session),
      });
  });

  it('are recorded in plain only when asked for, with error messages', async () => {
    const { spans, all } = await run('plain');
    for (const s of spans) expect(s.attributes).toMatchObject({ 'handoff_ledger.principal': scope.principal });
    const failed = spans.find((s) => s.attributes['handoff_ledger.outcome'] === 'SUMMARY_INVALID');
    expect(failed?.events[0]?.attributes?.['exception.message']).toEqual(expect.any(String));
    // "Metrics never carry ids" (README, "Operating it"): not even when spans record them in plain.
    expect(all.length).toBeGreaterThan(0);
    const metrics = everyValue([], all);
    expect(metrics).not.toContain(scope.principal);
    expect(metrics).not.toContain(scope.session);
    for (const m of all)
      for (const p of m.dataPoints)
        expect(
          Object.keys(p.attributes).filter((k) => /principal|session/.test(k)),
          m.descriptor.name,
        ).toEqual([]);
  });

  it('refuses a hash key that is not 32 bytes, before anything of the store is written', async () => {
    const t = sdk();
    const root = join(tempDir(), 'store');
    await expect(ledgerWith(t, { hashKey: new Uint8Array(16) }, { root })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(existsSync(root)).toBe(false);
    await expect(openLedger({ root, host: 'otel-host', telemetry: 'plain' as never })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(existsSync(root)).toBe(false);
  });

  it("read each id of the caller's scope once: a span names the session the call used, not a second read of it", async () => {
    // A getter answering differently the second time it is asked: the span recorded the first answer and the call used
    // the second (a publish to session-b recorded as one to session-a).
    const t = sdk();
    const ledger = await ledgerWith(t, 'plain');
    try {
      const reads: number[] = [];
      const shifting = (extra: object) => {
        let n = 0;
        reads.push(0);
        const at = reads.length - 1;
        return {
          principal: scope.principal,
          get session() {
            reads[at] = ++n;
            return n === 1 ? 'session-a' : 'session-b';
          },
          ...extra,
        };
      };
      await ledger.checkPublish(shifting({ run: 'r1' }) as never);
      await ledger.publish(shifting({ run: 'r1' }) as never, sampleSummary());
      const resumed = await ledger.resume(shifting({}) as never);
      await ledger.history(shifting({}) as never);
      expect(reads).toEqual([1, 1, 1, 1]);
      expect(resumed?.manifest.session).toBe('session-a');
      for (const s of t.spans()) expect(s.attributes['handoff_ledger.session'], s.name).toBe('session-a');
    } finally {
      await ledger.close();
    }
  });

  it('read the session of the export options once: the span names the session exported', async () => {
    const t = sdk();
    const ledger = await ledgerWith(t, 'plain');
    try {
      await ledger.publish({ principal: scope.principal, session: 'session-a', run: 'r1' }, sampleSummary());
      let reads = 0;
      const result = await exportBundle(ledger, {
        out: join(tempDir(), 'bundle'),
        get session() {
          return ++reads === 1 ? 'session-a' : 'session-b';
        },
      });
      expect(reads).toBe(1);
      expect(result.header.counts.chains).toBe(1);
      const exported = t.spans().find((s) => s.name === 'handoff_ledger.export');
      expect(exported?.attributes['handoff_ledger.session']).toBe('session-a');
    } finally {
      await ledger.close();
    }
  });

  it('record only ids: a value the call refuses (INVALID_ID) is neither recorded nor hashed', async () => {
    const hostile = `alice\n\u001b[31mFAKE LOG LINE level=error ${'x'.repeat(1 << 20)}`;
    for (const identifiers of ['plain', { hashKey: new Uint8Array(32).fill(7) }] as IdentifierPolicy[]) {
      const t = sdk();
      const ledger = await ledgerWith(t, identifiers);
      await expect(
        ledger.publish({ principal: hostile, session: scope.session, run: 'r1' }, sampleSummary()),
      ).rejects.toMatchObject({ code: 'INVALID_ID' });
      await expect(ledger.resume({ principal: scope.principal, session: hostile })).rejects.toMatchObject({
        code: 'INVALID_ID',
      });
      await ledger.close();
      const [published, resumed] = t.spans();
      expect(Object.keys(published!.attributes).filter((k) => k.includes('principal'))).toEqual([]);
      expect(Object.keys(resumed!.attributes).filter((k) => k.includes('session'))).toEqual([]);
      // The valid id beside it is still recorded.
      expect(Object.keys(published!.attributes).filter((k) => k.includes('session'))).toHaveLength(1);
      // Nowhere raw or whole (under 'plain' the error message names the first 40 characters, JSON-escaped).
      const values = t
        .spans()
        .flatMap((sp) => [
          ...Object.values(sp.attributes),
          ...sp.events.flatMap((e) => Object.values(e.attributes ?? {})),
        ]);
      for (const v of values) expect(String(v)).not.toMatch(/\u001b|\n|x{100}/);
    }
  });
});

describe('without an SDK', () => {
  afterEach(() => {
    trace.disable();
    metrics.disable();
  });

  it('publishes with no SDK registered, and reports to the global providers once one is', async () => {
    const silent = await openLedger({ root: join(tempDir(), 'store'), host: 'otel-host' });
    await silent.publish({ ...scope, run: 'r1' }, sampleSummary());
    await silent.close();
    const t = sdk();
    trace.setGlobalTracerProvider(t.tracerProvider);
    metrics.setGlobalMeterProvider(t.meterProvider);
    const ledger = await openLedger({ root: join(tempDir(), 'store'), host: 'otel-host' });
    await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
    await ledger.close();
    expect(t.spans().map((s) => s.name)).toEqual(['handoff_ledger.publish']);
    expect(
      (metric(await t.metrics(), 'handoff_ledger.publish.duration') as HistogramMetricData).dataPoints,
    ).toHaveLength(1);
  });
});

/** A context manager that keeps the active context on a stack (synchronous `with`): enough to see the active span. */
class StackContextManager implements ContextManager {
  private stack: Context[] = [];
  active(): Context {
    return this.stack.at(-1) ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    this.stack.push(ctx);
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.stack.pop();
    }
  }
  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const manager = this;
    return function (this: unknown, ...args: unknown[]) {
      return manager.with(ctx, () => (target as (...a: unknown[]) => unknown).apply(this, args));
    } as T;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.stack = [];
    return this;
  }
}

describe('with no provider registered (the operation alone, no span made for nothing)', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    trace.disable();
    metrics.disable();
    context.disable();
  });

  it('starts no span while nothing would record one, and one from the next operation once a provider is registered', async () => {
    const started = vi.spyOn(ProxyTracer.prototype, 'startActiveSpan');
    const telemetry = new LedgerTelemetry();
    const given: boolean[] = [];
    const op = async (span: { isRecording(): boolean }) => {
      given.push(span.isRecording());
      return 7;
    };
    expect(await telemetry.run('publish', { scope, host: 'h' }, op)).toBe(7);
    expect(started).not.toHaveBeenCalled();
    // A provider registered after the telemetry was made is used from the next operation on, as the proxy tracer does.
    const t = sdk();
    trace.setGlobalTracerProvider(t.tracerProvider);
    expect(await telemetry.run('publish', { scope, host: 'h' }, op)).toBe(7);
    expect(started).toHaveBeenCalledTimes(1);
    expect(given).toEqual([false, true]);
    expect(t.spans().map((s) => s.name)).toEqual(['handoff_ledger.publish']);
  });

  it('so does a ledger opened before the provider was registered', async () => {
    const ledger = await openLedger({ root: join(tempDir(), 'store'), host: 'otel-host' });
    try {
      await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
      const t = sdk();
      trace.setGlobalTracerProvider(t.tracerProvider);
      await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
      expect(t.spans().map((s) => [s.name, s.attributes['handoff_ledger.seq']])).toEqual([
        ['handoff_ledger.publish', 1],
      ]);
    } finally {
      await ledger.close();
    }
  });

  it("passes the operation's result and failure through unchanged, a synchronous throw as a rejection", async () => {
    const telemetry = new LedgerTelemetry();
    const failure = new ManifestError('CHAIN_CONFLICT', 'lost');
    await expect(telemetry.run('publish', {}, () => Promise.reject(failure))).rejects.toBe(failure);
    const thrown = telemetry.run('publish', {}, () => {
      throw failure;
    });
    expect(thrown).toBeInstanceOf(Promise);
    await expect(thrown).rejects.toBe(failure);
  });

  it('runs the operation under the no-op span, as the active one, when a context manager is registered', async () => {
    context.setGlobalContextManager(new StackContextManager());
    const telemetry = new LedgerTelemetry();
    const active = await telemetry.run('publish', {}, async () => trace.getActiveSpan());
    expect(active).toBeDefined();
    expect(active!.isRecording()).toBe(false);
    expect(active!.spanContext()).toEqual(INVALID_SPAN_CONTEXT);
  });

  it('records the metrics of a meter provider registered after the ledger opened, from its next operation on', async () => {
    // As spans do: an application that opens the ledger before its SDK starts loses neither from then on.
    const ledger = await openLedger({ root: join(tempDir(), 'store'), host: 'otel-host' });
    try {
      await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
      const t = sdk();
      metrics.setGlobalMeterProvider(t.meterProvider);
      const receipt = await ledger.publish({ ...scope, run: 'r1' }, sampleSummary(2));
      const all = await t.metrics();
      const points = (metric(all, 'handoff_ledger.publish.duration') as HistogramMetricData | undefined)?.dataPoints;
      expect(points?.map((p) => p.value.count)).toEqual([1]);
      expect(metric(all, 'handoff_ledger.summary.bytes')?.dataPoints.map((p) => p.value)).toEqual([receipt.size]);
    } finally {
      await ledger.close();
    }
  });

  it('records the metrics of a meter provider registered before it was made, with no tracer provider', async () => {
    const t = sdk();
    metrics.setGlobalMeterProvider(t.meterProvider);
    const telemetry = new LedgerTelemetry();
    await telemetry.run('publish', {}, async () => 1);
    const points = (metric(await t.metrics(), 'handoff_ledger.publish.duration') as HistogramMetricData).dataPoints;
    expect(points).toHaveLength(1);
    expect(points[0]!.attributes).toEqual({ 'handoff_ledger.outcome': 'ok' });
  });
});

describe('a telemetry sink that throws', () => {
  const throwing = (where: 'onStart' | 'onEnd') => ({
    onStart() {
      if (where === 'onStart') throw new Error('processor onStart failed');
    },
    onEnd() {
      if (where === 'onEnd') throw new Error('processor onEnd failed');
    },
    forceFlush: async () => {},
    shutdown: async () => {},
  });
  /** A meter whose instruments throw on every recording. */
  const throwingMeter = {
    getMeter: () => ({
      createHistogram: () => ({
        record() {
          throw new Error('histogram failed');
        },
      }),
      createCounter: () => ({
        add() {
          throw new Error('counter failed');
        },
      }),
    }),
  } as unknown as MeterProvider;

  it.each(['onStart', 'onEnd'] as const)(
    'never turns an operation into a failure, nor changes its error code (span processor %s, meter)',
    async (where) => {
      const root = join(tempDir(), 'store');
      const tracerProvider = new BasicTracerProvider({ spanProcessors: [throwing(where)] });
      const ledger = await openLedger({
        root,
        host: 'otel-host',
        telemetry: { tracerProvider, meterProvider: throwingMeter },
      });
      const receipt = await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
      expect(receipt.seq).toBe(0);
      expect((await ledger.resume(scope))?.id).toBe(receipt.id);
      await expect(ledger.publish({ ...scope, run: '../bad' }, sampleSummary())).rejects.toMatchObject({
        code: 'INVALID_ID',
      });
      expect(await ledger.history(scope)).toHaveLength(1);
      await ledger.close();
    },
  );

  it('runs the operation once, without a span, when the tracer itself throws', async () => {
    let calls = 0;
    const tracerProvider = {
      getTracer: () => ({
        startSpan: () => {
          throw new Error('tracer failed');
        },
        startActiveSpan: () => {
          calls++;
          throw new Error('tracer failed');
        },
      }),
    } as unknown as BasicTracerProvider;
    const ledger = await openLedger({
      root: join(tempDir(), 'store'),
      host: 'otel-host',
      telemetry: { tracerProvider },
    });
    await ledger.publish({ ...scope, run: 'r1' }, sampleSummary());
    expect(await ledger.history(scope)).toHaveLength(1);
    expect(calls).toBe(2); // publish and history each asked once
    await ledger.close();
  });
});

describe('a tracer or meter provider with ways of its own', () => {
  it('leaves no unhandled rejection when the tracer hands back a promise of its own made from the operation', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const real = new BasicTracerProvider().getTracer('t');
    const tracerProvider = {
      getTracer: () => ({
        startSpan: real.startSpan.bind(real),
        startActiveSpan: (_: string, __: unknown, fn: (span: unknown) => Promise<unknown>) =>
          fn(real.startSpan('x')).finally(() => {}),
      }),
    } as unknown as BasicTracerProvider;
    const ledger = await openLedger({
      root: join(tempDir(), 'store'),
      host: 'otel-host',
      telemetry: { tracerProvider },
    });
    try {
      await expect(ledger.publish({ ...scope, run: '../bad' }, sampleSummary())).rejects.toMatchObject({
        code: 'INVALID_ID',
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await ledger.close();
    }
  });

  it('answers a committed publish as committed when the tracer hands back a thenable whose then throws', async () => {
    const real = new BasicTracerProvider().getTracer('t');
    const tracerProvider = {
      getTracer: () => ({
        startSpan: real.startSpan.bind(real),
        startActiveSpan: (_: string, __: unknown, fn: (span: unknown) => Promise<unknown>) => {
          void fn(real.startSpan('x'));
          return {
            then() {
              throw new Error('exporter wrapper bug');
            },
          };
        },
      }),
    } as unknown as BasicTracerProvider;
    const root = join(tempDir(), 'store');
    const ledger = await openLedger({ root, host: 'otel-host', telemetry: { tracerProvider } });
    expect((await ledger.publish({ ...scope, run: 'r1' }, sampleSummary())).seq).toBe(0);
    await ledger.close();
    const again = await openLedger({ root, host: 'otel-host' });
    expect(await again.history(scope)).toHaveLength(1);
    await again.close();
  });

  it('opens and publishes when the providers throw while their instruments are made', async () => {
    const tracerProvider = {
      getTracer: () => {
        throw new Error('tracer failed');
      },
    } as unknown as BasicTracerProvider;
    const meterProvider = {
      getMeter: () => ({
        createHistogram: () => {
          throw new Error('histogram failed');
        },
      }),
    } as unknown as MeterProvider;
    const ledger = await openLedger({
      root: join(tempDir(), 'store'),
      host: 'otel-host',
      telemetry: { tracerProvider, meterProvider },
    });
    expect((await ledger.publish({ ...scope, run: 'r1' }, sampleSummary())).seq).toBe(0);
    await ledger.close();
  });
});
