/**
 * Telemetry through the OpenTelemetry API only: spans and metrics for publish, resume, history, export,
 * verify and gc. The API is a no-op until the host application registers an SDK (or passes providers
 * here), so a library user who does nothing pays for nothing and sends nothing anywhere.
 *
 * Principal and session ids can be personal data (a user name, a conversation id). They are left out by
 * default; `identifiers: 'plain'` records them, `{ hashKey }` records a keyed BLAKE3 hash that joins
 * spans of one session without naming it. Error messages can carry ids too, so spans carry the error
 * code only, and the message only when identifiers are recorded in plain.
 *
 * `@opentelemetry/api` is an optional peer dependency (yarn classic and `npm --omit=peer` leave it out): it is loaded
 * when the first telemetry is made, and while it is not installed telemetry is off (every operation runs alone, as
 * under the API's no-op globals). Only a `tracerProvider` or `meterProvider` given then is refused (INVALID_ARGUMENT
 * naming the package): the caller asked for what cannot be recorded.
 */
import type * as OpenTelemetryApi from '@opentelemetry/api';
import type {
  Attributes,
  Counter,
  Histogram,
  Meter,
  MeterProvider,
  ProxyTracerProvider,
  Span,
  TracerProvider,
} from '@opentelemetry/api';
import { createRequire } from 'node:module';
import { blake3 } from '@noble/hashes/blake3.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { isValidId } from '../../manifests/format/id-pattern.js';
import { LedgerError } from '../errors.js';
import { isUint8Array, readOptionFields, shownValue } from '../../store/errors.js';

/** How principal and session ids appear in telemetry. */
export type IdentifierPolicy = 'omit' | 'plain' | { hashKey: Uint8Array };

export interface TelemetryOptions {
  /** Default: the global provider (`trace.setGlobalTracerProvider`), a no-op until an SDK registers one. */
  tracerProvider?: TracerProvider | undefined;
  /** Default: the global provider (`metrics.setGlobalMeterProvider`). */
  meterProvider?: MeterProvider | undefined;
  /** Principal and session ids on spans: `'omit'` (default), `'plain'`, or hashed with a 32-byte key. */
  identifiers?: IdentifierPolicy | undefined;
}

export type Operation = 'publish' | 'check_publish' | 'resume' | 'history' | 'export' | 'verify' | 'gc';

export const INSTRUMENTATION_NAME = 'handoff-ledger';
/** Attribute names: one namespace, so an operator can find everything this library records. */
export const ATTR = {
  operation: 'handoff_ledger.operation',
  outcome: 'handoff_ledger.outcome',
  errorType: 'error.type',
  host: 'handoff_ledger.host',
  principal: 'handoff_ledger.principal',
  session: 'handoff_ledger.session',
  principalHash: 'handoff_ledger.principal_hash',
  sessionHash: 'handoff_ledger.session_hash',
} as const;

/**
 * Bucket boundaries advised for the duration histograms, in seconds: OpenTelemetry's for request durations (5 ms to
 * 10 s) and 30 s, 1 min and 5 min for export and gc of a large store. The SDK's default boundaries (0, 5, 10, 25, …,
 * 10000) are meant for milliseconds: in seconds every operation under five would fall in one bucket. A view the
 * application configures still decides; an SDK before advice (API 1.7) uses its defaults.
 */
const DURATION_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300,
];

const OPERATIONS: readonly Operation[] = ['publish', 'check_publish', 'resume', 'history', 'export', 'verify', 'gc'];

/** The code of a coded error (every error class here has one), else the class name: low cardinality either way. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(code)) return code;
  return (err as Error | null)?.name ?? 'UNKNOWN';
}

/**
 * The identifier policy, checked (openLedger calls it before anything is written).
 * @throws LedgerError `INVALID_ARGUMENT` for a hash key that is not 32 bytes, or another policy
 */
export function checkIdentifierPolicy(policy: IdentifierPolicy): IdentifierPolicy {
  if (policy === 'omit' || policy === 'plain') return policy;
  if (!isUint8Array(policy?.hashKey) || policy.hashKey.length !== 32)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      "telemetry identifiers: hashKey must be 32 bytes (or use 'omit' / 'plain')",
    );
  return { hashKey: Uint8Array.from(policy.hashKey) };
}

type Api = typeof OpenTelemetryApi;
let loadedApi: { api: Api | undefined } | undefined;

/**
 * The application's `@opentelemetry/api` (one copy: `require` and `import` of it resolve to the same file under Node),
 * or undefined when it is not installed. Loaded once, on first use, not when the library is imported. A package that is
 * there but fails to load is not taken for absent: its error is thrown.
 */
function openTelemetryApi(): Api | undefined {
  if (loadedApi === undefined) {
    try {
      loadedApi = { api: createRequire(import.meta.url)('@opentelemetry/api') as Api };
    } catch (err) {
      const missing =
        (err as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND' &&
        /^Cannot find module '@opentelemetry\/api'/.test(String((err as Error).message));
      if (!missing) throw err;
      loadedApi = { api: undefined };
    }
  }
  return loadedApi.api;
}

/**
 * Telemetry options the ledger can honour: a `tracerProvider` or `meterProvider` needs `@opentelemetry/api` installed
 * (openLedger calls it before anything is written; the identifier policy alone records nothing, so it is accepted).
 * @throws LedgerError `INVALID_ARGUMENT` naming the package when it is not installed
 */
export function checkTelemetryProviders(options: TelemetryOptions | undefined): void {
  for (const field of ['tracerProvider', 'meterProvider'] as const)
    if (options?.[field] !== undefined && openTelemetryApi() === undefined)
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `telemetry ${field} needs @opentelemetry/api, an optional peer dependency of handoff-ledger that is not installed: add it to the application (npm install @opentelemetry/api), or leave telemetry out`,
      );
}

/** A span that records nothing, for the operations run while the API is not installed. */
const DETACHED_SPAN: Span = {
  spanContext: () => ({ traceId: '00000000000000000000000000000000', spanId: '0000000000000000', traceFlags: 0 }),
  setAttribute() {
    return this;
  },
  setAttributes() {
    return this;
  },
  addEvent() {
    return this;
  },
  addLink() {
    return this;
  },
  addLinks() {
    return this;
  },
  setStatus() {
    return this;
  },
  updateName() {
    return this;
  },
  end() {},
  isRecording: () => false,
  recordException() {},
};

/** Instruments that record nothing, while the API is not installed. */
const DETACHED_INSTRUMENT = { add() {}, record() {} } as unknown as Counter & Histogram;

/** The ledger's instruments, made by `meter`. */
function instruments(meter: Meter) {
  return {
    durations: Object.fromEntries(
      OPERATIONS.map((op) => [
        op,
        meter.createHistogram(`handoff_ledger.${op}.duration`, {
          description: `Duration of ${op}, successful or not (attribute handoff_ledger.outcome)`,
          unit: 's',
          advice: { explicitBucketBoundaries: [...DURATION_BUCKETS] },
        }),
      ]),
    ) as Record<Operation, Histogram>,
    bytes: meter.createCounter('handoff_ledger.summary.bytes', {
      description: 'Summary bytes written by publish and read by resume',
      unit: 'By',
    }),
    failures: meter.createCounter('handoff_ledger.failures', {
      description: 'Failed operations, by operation and error code (error.type)',
    }),
    retries: meter.createCounter('handoff_ledger.chain_conflict.retries', {
      description: 'Publishes re-signed after another writer appended to the chain first',
    }),
  };
}

/** What `context.bind` returns unchanged exactly while no context manager is registered (the API's no-op one). */
function contextProbe(): void {}

/** The ledger's telemetry; one per ledger, built from its `telemetry` option. */
export class LedgerTelemetry {
  /** `@opentelemetry/api`, or undefined while it is not installed: then nothing is recorded (`idle`). */
  private readonly api: Api | undefined;
  /** The span an operation gets while nothing would record it (`idle`). */
  private readonly unrecorded: Span;
  private readonly tracer: ReturnType<TracerProvider['getTracer']> | undefined;
  /**
   * The global proxy provider the tracer came from while it had no provider behind it, and what `getDelegate` gave
   * then (the API's no-op provider); cleared for good once a provider is registered behind it.
   */
  private waiting: { provider: ProxyTracerProvider; none: TracerProvider } | undefined;
  /** The instruments came from the no-op meter: they record nothing (until `meterRegistered` replaces them). */
  private metricsOff: boolean;
  /** No meter provider was given nor registered globally when this was made: `meterRegistered` looks again. */
  private meterWaiting: boolean;
  private readonly version: string;
  private durations: Record<Operation, Histogram>;
  private bytes: Counter;
  private failures: Counter;
  private retries: Counter;
  private readonly identifiers: IdentifierPolicy;

  /**
   * @param given the ledger's `telemetry` option (absent or `null`: the global API's providers)
   * @param version the instrumentation scope's version its tracer and meter are asked for (the package's, for a ledger)
   * @throws LedgerError `INVALID_ARGUMENT` for options that are none or a version that is no text (a number was handed
   *   on to the providers as the scope's version)
   */
  constructor(given: TelemetryOptions = {}, version = '') {
    if (typeof version !== 'string')
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `LedgerTelemetry: version must be text (the instrumentation scope's version), not ${shownValue(version)}`,
      );
    // Each field read once (a getter that throws, or a name it does not know: INVALID_ARGUMENT naming it).
    const options = readOptionFields(
      given,
      ['tracerProvider', 'meterProvider', 'identifiers'],
      'telemetry options',
      LedgerError,
    ) as TelemetryOptions;
    this.identifiers = checkIdentifierPolicy(options.identifiers ?? 'omit');
    checkTelemetryProviders(options);
    const api = (this.api = openTelemetryApi());
    if (api === undefined) {
      this.unrecorded = DETACHED_SPAN;
      this.tracer = undefined;
      this.waiting = undefined;
      this.metricsOff = true;
      this.meterWaiting = false;
      this.version = version;
      const none: Histogram = DETACHED_INSTRUMENT;
      this.durations = Object.fromEntries(OPERATIONS.map((op) => [op, none])) as Record<Operation, Histogram>;
      this.bytes = this.failures = this.retries = DETACHED_INSTRUMENT;
      return;
    }
    const { trace, metrics, ProxyTracer, ProxyTracerProvider, createNoopMeter } = api;
    this.unrecorded = trace.wrapSpanContext(api.INVALID_SPAN_CONTEXT);
    // A provider that throws here gets no-op instruments, never a failed open: telemetry never fails the ledger.
    const provider = options.tracerProvider ?? safely(() => trace.getTracerProvider());
    this.tracer =
      safely(() => provider!.getTracer(INSTRUMENTATION_NAME, version)) ??
      new ProxyTracerProvider().getTracer(INSTRUMENTATION_NAME);
    // No provider yet (the global proxy with nothing behind it): its tracer starts no-op spans until one is
    // registered, and then the provider's. While that is so, `run` skips the no-op span (`idle`).
    this.waiting =
      options.tracerProvider === undefined &&
      provider instanceof ProxyTracerProvider &&
      this.tracer instanceof ProxyTracer &&
      safely(() => provider.getDelegateTracer(INSTRUMENTATION_NAME, version)) === undefined
        ? { provider, none: provider.getDelegate() }
        : undefined;
    let meter = safely(() =>
      (options.meterProvider ?? metrics.getMeterProvider()).getMeter(INSTRUMENTATION_NAME, version),
    );
    // No meter provider given, and none registered globally yet (the API's no-op meter, which is no proxy: a provider
    // registered later does not reach its instruments): looked for again before each operation (`meterRegistered`).
    this.meterWaiting = options.meterProvider === undefined && meter === createNoopMeter();
    this.version = version;
    let made = meter === undefined ? undefined : safely(() => instruments(meter!));
    if (made === undefined) made = instruments((meter = createNoopMeter()));
    // The API's no-op meter makes instruments that record nothing.
    this.metricsOff = meter === createNoopMeter();
    this.durations = made.durations;
    this.bytes = made.bytes;
    this.failures = made.failures;
    this.retries = made.retries;
  }

  /**
   * While the instruments are the no-op meter's for want of a global meter provider: one registered since is used from
   * this operation on, as a tracer provider registered late is (once; a provider that throws as its instruments are
   * made leaves the no-op ones, as at construction).
   */
  private meterRegistered(): void {
    if (!this.meterWaiting) return;
    const api = this.api!;
    const meter = safely(() => api.metrics.getMeterProvider().getMeter(INSTRUMENTATION_NAME, this.version));
    if (meter === undefined || meter === api.createNoopMeter()) return;
    this.meterWaiting = false;
    const made = safely(() => instruments(meter));
    if (made === undefined) return;
    this.durations = made.durations;
    this.bytes = made.bytes;
    this.failures = made.failures;
    this.retries = made.retries;
    this.metricsOff = false;
  }

  /** Attributes naming a principal and session, as the identifier policy allows. */
  private identify(scope: unknown): Attributes {
    if (this.identifiers === 'omit' || typeof scope !== 'object' || scope === null) return {};
    const out: Attributes = {};
    for (const [field, plain, hashed] of [
      ['principal', ATTR.principal, ATTR.principalHash],
      ['session', ATTR.session, ATTR.sessionHash],
    ] as const) {
      const value = (scope as Record<string, unknown>)[field];
      // Only an id: a value the call then refuses (INVALID_ID) may be a megabyte of escapes or a forged log line.
      if (!isValidId(value)) continue;
      if (this.identifiers === 'plain') out[plain] = value;
      else out[hashed] = bytesToHex(blake3(new TextEncoder().encode(value), { key: this.identifiers.hashKey }));
    }
    return out;
  }

  /**
   * Runs one operation inside a span named `handoff_ledger.<op>` and records its duration, outcome
   * (`ok` or the error code) and, through `describe`, what it moved. The operation's own result or
   * error passes through unchanged; telemetry never turns a success into a failure: a tracer, span, meter or
   * processor that throws is ignored (the operation then runs under a non-recording span if none was started).
   */
  async run<T>(
    op: Operation,
    init: { scope?: unknown; host?: string | undefined },
    fn: (span: Span) => Promise<T>,
    describe?: (result: T) => { attributes?: Attributes | undefined; bytes?: number | undefined },
  ): Promise<T> {
    // Nothing would record it: the operation alone, under a span that records nothing, as the no-op tracer would run
    // it (no span, context or attributes made for nothing; a throw is this call's rejection, as from `traced`).
    this.meterRegistered();
    if (this.idle()) return fn(this.unrecorded);
    // The operation runs once: inside the span when the tracer calls back, else (it threw first) without one.
    let pending: Promise<T> | undefined;
    const traced = (span: Span): Promise<T> => (pending ??= this.traced(op, span, fn, describe));
    const returned = safely(() => {
      const attributes: Attributes = { [ATTR.operation]: op, ...this.identify(init.scope) };
      if (init.host !== undefined) attributes[ATTR.host] = init.host;
      return this.tracer!.startActiveSpan(`handoff_ledger.${op}`, { attributes }, traced);
    });
    // A tracer may hand back a promise of its own made from the operation's (`.finally(...)`): it rejects when the
    // operation fails, and nobody else awaits it.
    // Whatever it handed back is the tracer's: a `then` that throws does not reach the caller either.
    safely(() => {
      if (returned !== pending && typeof (returned as { then?: unknown } | undefined)?.then === 'function')
        (returned as Promise<unknown>).then(undefined, () => {});
    });
    return pending ?? traced(this.unrecorded);
  }

  /**
   * True while a span and its metrics would record nothing: the instruments are the no-op meter's, the tracer is the
   * global proxy's with no provider registered behind it yet (looked at on every call: one registered later is used from
   * the next operation on, as the proxy itself would), and no context manager is registered (so the no-op span would
   * not be seen as the active one inside the operation either: `context.with` under the no-op manager only calls it).
   */
  private idle(): boolean {
    if (this.api === undefined) return true;
    if (!this.metricsOff || this.waiting === undefined) return false;
    if (this.waiting.provider.getDelegate() !== this.waiting.none) {
      this.waiting = undefined; // a provider is registered: from now on every operation goes through the tracer
      return false;
    }
    return this.api.context.bind(this.api.ROOT_CONTEXT, contextProbe) === contextProbe;
  }

  private async traced<T>(
    op: Operation,
    span: Span,
    fn: (span: Span) => Promise<T>,
    describe?: (result: T) => { attributes?: Attributes | undefined; bytes?: number | undefined },
  ): Promise<T> {
    const started = performance.now();
    let outcome = 'ok';
    try {
      const result = await fn(span);
      safely(() => {
        const described = describe?.(result);
        if (described?.attributes) span.setAttributes(described.attributes);
        if (described?.bytes !== undefined) {
          span.setAttribute('handoff_ledger.summary.bytes', described.bytes);
          this.bytes.add(described.bytes, { [ATTR.operation]: op });
        }
      });
      return result;
    } catch (err) {
      outcome = errorCode(err);
      safely(() => {
        span.setAttribute(ATTR.errorType, outcome);
        span.recordException({
          name: outcome,
          ...(this.identifiers === 'plain' ? { message: (err as Error)?.message } : {}),
        });
        span.setStatus({ code: this.api!.SpanStatusCode.ERROR, message: outcome });
        this.failures.add(1, { [ATTR.operation]: op, [ATTR.errorType]: outcome });
      });
      throw err;
    } finally {
      safely(() => {
        span.setAttribute(ATTR.outcome, outcome);
        this.durations[op].record((performance.now() - started) / 1000, {
          [ATTR.outcome]: outcome,
          ...(outcome === 'ok' ? {} : { [ATTR.errorType]: outcome }),
        });
      });
      safely(() => span.end());
    }
  }

  /** One more attempt at appending after another writer won the race for the chain head. */
  chainConflictRetry(span: Span): void {
    safely(() => {
      this.retries.add(1);
      span.addEvent('handoff_ledger.chain_conflict.retry');
    });
  }
}

function safely<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}
