/**
 * What every provider adapter does the same way: recognise the summary request, give it the dialect's
 * schema, and read a structured answer back (normalising strict-mode nulls). The adapters import their
 * SDK for types only: the Harness makes the client, so an SDK is loaded only by a Harness that uses it.
 */
import {
  ANSWER_HOW,
  endedUnfinished,
  SUBMIT_HANDOFF,
  wellFormedInput,
  type CompactionMode,
} from '../compaction/tool.js';
import type {
  ModelFinishReason,
  ModelMessage,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
} from '../compaction/model.js';
import { LedgerError } from '../errors.js';
import { readOptionFields, shownValue, typeWithArticle } from '../../store/errors.js';
import { isRecord, normalizeStrictSummary, summarySchemaFor, type SummarySchemaForm } from '../summary/schema-forms.js';

/**
 * A provider's finish reason in the library's words, `'other'` for one the dialect's table does not name. Looked up as
 * an own key of the table only: the provider's text is foreign input, and `table["constructor"]` (or `__proto__`,
 * `toString`) is an Object member, which came back as the finish reason in place of `'other'`.
 */
export function finishReasonOf(table: Readonly<Record<string, ModelFinishReason>>, reason: unknown): ModelFinishReason {
  return typeof reason === 'string' && Object.prototype.hasOwnProperty.call(table, reason) ? table[reason]! : 'other';
}

/**
 * `out` with the provider's own reason (`providerReason`) when its answer did not finish (`endedUnfinished`: a reason
 * other than `stop`, `tool_calls` and `refusal`) and the provider gave one as text: what `SUMMARY_INCOMPLETE` names.
 */
export function withProviderReason(out: ModelResponse, reason: unknown): ModelResponse {
  if (endedUnfinished(out.finishReason) && typeof reason === 'string' && reason !== '') out.providerReason = reason;
  return out;
}

/**
 * The adapters ask for a handoff summary, and nothing else: each sends its dialect's summary schema (Gemini's response
 * schema in place of any tool, strict mode on every function for OpenAI), which a normal turn of the Harness must not
 * get. A request of another purpose is refused before anything is sent; a Harness's turns go through its own call of
 * the SDK.
 * @throws LedgerError `INVALID_ARGUMENT` for a request whose `purpose` is not `compaction`
 */
export function compactionOnly(adapter: string, request: ModelRequest): void {
  const purpose: unknown = (request as { purpose?: unknown } | null | undefined)?.purpose;
  if (purpose !== 'compaction')
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `${adapter} is for compaction requests only (purpose 'compaction', as compactionRequest builds them), not ` +
        shownValue(purpose),
    );
}

/**
 * The request as an adapter that always asks one way sends it: the instruction `compactionRequest` ended with the
 * other way's sentence (`ANSWER_HOW`: "Call submit_handoff …" in tool mode, "Answer only … as JSON …" in structured
 * mode) ends with the sentence of `asked`, the way the adapter asks (Anthropic: the forced tool; Gemini: the response
 * schema). Nothing else changes; a request whose last message does not end with the other sentence (one a Harness
 * framed itself) goes as it is.
 */
export function askedAs(request: ModelRequest, asked: CompactionMode): ModelRequest {
  const messages: unknown = request.messages;
  if (!Array.isArray(messages)) return request;
  const last = messages.at(-1) as ModelMessage | undefined;
  const other = `\n\n${ANSWER_HOW[asked === 'tool' ? 'structured' : 'tool']}`;
  if (last?.role !== 'user' || typeof last.content !== 'string' || !last.content.endsWith(other)) return request;
  const content = `${last.content.slice(0, -other.length)}\n\n${ANSWER_HOW[asked]}`;
  return { ...request, messages: [...(messages as ModelMessage[]).slice(0, -1), { ...last, content }] };
}

/**
 * An adapter factory's options, each field read once (a getter or proxy that throws: `INVALID_ARGUMENT` naming it),
 * refused when they are no object or name no model (and, for an adapter over a provider SDK, no client): at the
 * factory's call, where the Harness wires it, not as a TypeError there or a model failure at the first compaction.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
export function adapterOptions<K extends string>(
  adapter: string,
  given: unknown,
  names: readonly K[],
): { [P in K]?: unknown } {
  if (typeof given !== 'object' || given === null)
    throw new LedgerError('INVALID_ARGUMENT', `${adapter} needs an options object, not ${typeWithArticle(given)}`);
  const options = readOptionFields(given, names, `${adapter} options`, LedgerError);
  const fields = options as Record<string, unknown>;
  if ((names as readonly string[]).includes('client') && (typeof fields.client !== 'object' || fields.client === null))
    throw new LedgerError('INVALID_ARGUMENT', `${adapter}: client must be the provider SDK's client object`);
  const model = fields.model;
  const modelObject = adapter === 'aiSdkAdapter' && typeof model === 'object' && model !== null;
  if (!modelObject && (typeof model !== 'string' || model === ''))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `${adapter}: model must be ${adapter === 'aiSdkAdapter' ? 'a LanguageModel or ' : ''}a non-empty model name`,
    );
  return options;
}

/**
 * Refuses, at the factory's call, a client without the method the adapter calls (`path` from the client, e.g.
 * `['chat', 'completions', 'create']`): one lacking it (`{}`, another SDK's client, a wrapper that left it out) was
 * taken, and failed only at the first compaction as a TypeError (`Cannot read properties of undefined`). Duck-typed:
 * any object along whose path a function is found is taken (the SDK's client, a wrapped or a fake one), and the method
 * is looked up again at each call, as before. A getter on the path that throws is refused as well, its error the cause.
 * @throws LedgerError `INVALID_ARGUMENT` naming the missing method (`tail`: what calls it, and what client to pass)
 */
export function requireClientMethod(adapter: string, client: object, path: readonly string[], tail: string): void {
  const name = `${path.join('.')}()`;
  let at: unknown = client;
  for (const key of path) {
    if ((typeof at !== 'object' && typeof at !== 'function') || at === null) break;
    try {
      at = (at as Record<string, unknown>)[key];
    } catch (err) {
      throw new LedgerError('INVALID_ARGUMENT', `${adapter}: reading the client's ${name} failed`, { cause: err });
    }
  }
  if (typeof at !== 'function')
    throw new LedgerError('INVALID_ARGUMENT', `${adapter}: the client has no ${name}, ${tail}`);
}

/**
 * A factory's whole-number option (`maxTokens`, `timeoutMs`, `maxRetries`): absent (`undefined` or `null`: the default),
 * or a safe integer from `least` to `most`. Refused at the factory's call, as its other options are: a NaN or Infinity
 * went out as `null` (Anthropic's `max_tokens`: every compaction refused by the API, its transcript sent each time), a
 * string as a string, a timeout of 0 or past the longest Node timer (2^31 − 1 ms) aborted every request at once after
 * sending it, and a negative retry count made every compaction MODEL_FAILED.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
export function wholeNumberOption(
  adapter: string,
  name: string,
  value: unknown,
  least: number,
  most = Number.MAX_SAFE_INTEGER,
): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < least || value > most)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `${adapter}: ${name} must be a whole number from ${least}${most === Number.MAX_SAFE_INTEGER ? '' : ` to ${most}`}, not ${shownValue(value)}`,
    );
  return value;
}

/** The schema a tool or response format is sent with: the dialect's summary form for the handoff. */
export function schemaFor(
  name: string,
  schema: Record<string, unknown>,
  form: SummarySchemaForm,
): Record<string, unknown> {
  return isSummaryTool(name) ? summarySchemaFor(form) : schema;
}

export function isSummaryTool(name: string): boolean {
  return name === SUBMIT_HANDOFF;
}

/** The system messages joined (APIs that take the system prompt apart), and the others. */
export function splitSystem(messages: readonly ModelMessage[]): { system: string | undefined; rest: ModelMessage[] } {
  const system = messages.filter((m) => m.role === 'system').map((m) => m.content);
  return {
    system: system.length > 0 ? system.join('\n\n') : undefined,
    rest: messages.filter((m) => m.role !== 'system'),
  };
}

/**
 * The turns without the ones that say nothing (no text but whitespace, no tool call; e.g. an assistant turn that was
 * only reasoning): Anthropic's and Gemini's APIs refuse a request carrying one. Tool results stay, whatever they hold.
 */
export function withoutEmptyTurns(messages: readonly ModelMessage[]): ModelMessage[] {
  return messages.filter((m) => m.role === 'tool' || (m.toolCalls?.length ?? 0) > 0 || !saysNothing(m.content));
}

/**
 * Text that says nothing (empty or whitespace): left out of an assistant turn that calls tools, as `withoutEmptyTurns`
 * leaves out a whole turn (Anthropic refuses a whitespace-only text block: "text content blocks must contain
 * non-whitespace text").
 */
export function saysNothing(text: string): boolean {
  return text.trim() === '';
}

/**
 * A transcript tool call's input as JSON arguments text (OpenAI): a raw string the provider returned unparsed goes
 * back as it came, a missing input as `{}` (the API requires arguments).
 */
export function toolArguments(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input ?? {});
}

/**
 * A transcript tool call's input as the JSON object an API requires (Anthropic `tool_use.input`): an object as it is,
 * a raw string that parses to an object parsed, anything else kept under `input`.
 */
export function toolInputObject(input: unknown): Record<string, unknown> {
  if (isRecord(input)) return input;
  if (typeof input === 'string') {
    try {
      // Well formed as compactionRequest made the text: an escape in it (`\ud83d`) parses to a lone surrogate, which the
      // provider's JSON body would carry as the escape its API refuses.
      const parsed: unknown = JSON.parse(input);
      if (isRecord(parsed)) return wellFormedInput(parsed) as Record<string, unknown>;
    } catch {
      // kept as text below
    }
  }
  return input === undefined ? {} : { input };
}

/**
 * Parses JSON the model wrote (structured text, tool arguments); a strict answer's nulls become absent
 * fields. `undefined` for text that is not JSON: the caller leaves it as text, and `extractSummary`
 * reports it (`SUMMARY_INVALID`).
 */
export function readJson(text: string, strict: boolean): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return strict ? normalizeStrictSummary(value) : value;
}

/**
 * A tool call read back: the handoff's input normalised when it was requested in strict form. `given` says what
 * the provider handed over: the arguments' JSON `text` (parsed here, once), or a `value` it parsed itself. What
 * is not parsed is passed on as JSON text, which `extractSummary` parses exactly once: text that is not JSON, or
 * JSON of a string (a summary encoded twice), reaches it as text and is refused, never decoded a second time.
 */
export function toolCall(
  id: string,
  name: string,
  input: unknown,
  strict: boolean,
  given: 'text' | 'value' = 'text',
): ModelToolCall {
  let value: unknown;
  if (given === 'value') value = typeof input === 'string' ? JSON.stringify(input) : input;
  else if (typeof input !== 'string') value = input;
  else {
    const parsed = readJson(input, false);
    value = parsed === undefined || typeof parsed === 'string' ? input : parsed;
  }
  return { id, name, input: strict && isSummaryTool(name) ? normalizeStrictSummary(value) : value };
}

/**
 * The blocks of a Messages API answer that are no call: `text`, the answer's words, and the model's thinking (left
 * out). anthropicAdapter reads an answer's blocks so, and aiSdkAdapter the raw body of the ai SDK's Anthropic provider.
 */
export const ANTHROPIC_LEFT_OUT: ReadonlySet<string> = new Set(['text', 'thinking', 'redacted_thinking']);

/**
 * Any other block of a Messages API answer than text, thinking and `tool_use`, as a call named to extractSummary
 * (`SUMMARY_INVALID`, as a client tool call of another tool than submit_handoff is): a tool the API ran itself during
 * the summary turn (`server_tool_use`, `mcp_tool_use`: named by the tool, `web_search`), what it gave back
 * (`web_search_tool_result`, `code_execution_tool_result`, `container_upload`, …: named by the block's type), or a
 * block the adapter does not know. The summary turn offers no such tool; an answer written beside them (after a web
 * search, a fetched page, code run in a container) is not a summary of the transcript alone, and is not taken for one.
 * Read structurally: the block may be none of the SDK's union.
 */
export function anthropicServerBlock(b: object): ModelToolCall {
  const { type, id, tool_use_id, name, input } = b as Record<string, unknown>;
  const typeName = typeof type === 'string' ? type : 'a block without a type';
  const named = typeName.endsWith('tool_use') && typeof name === 'string' ? name : typeName;
  const ref = typeof id === 'string' ? id : typeof tool_use_id === 'string' ? tool_use_id : '';
  return toolCall(ref, named, input, false, 'value');
}

/**
 * The fields of a Gemini `Part` that are read (`text`, unless `thought`; `functionCall`) or left out: the model's
 * thinking (`thought`, `thoughtSignature`) and what only says how a part's content is to be taken (`videoMetadata`,
 * `mediaResolution`, `mediaProcessing`, `speechMetadata`, `partMetadata`), none of them content of its own.
 */
const GEMINI_PART_READ: ReadonlySet<string> = new Set([
  'text',
  'functionCall',
  'thought',
  'thoughtSignature',
  'videoMetadata',
  'mediaResolution',
  'mediaProcessing',
  'speechMetadata',
  'partMetadata',
]);

/**
 * Any other field a Gemini part holds, to be named to extractSummary by the field (`SUMMARY_INVALID`, as a call of
 * another tool than submit_handoff is): code the model ran or meant to run (`executableCode`, `codeExecutionResult`),
 * a server-side tool's call or its result (`toolCall`, `toolResponse`), a function's result (`functionResponse`),
 * media the model made (`inlineData`, `fileData`, `audioTranscription`), or a field the adapter does not know (the SDK
 * hands a part's fields over as the API sent them). The summary turn offers no tool and asks for JSON text only; an
 * answer written beside them is not a summary of the transcript alone, and is not taken for one. A thought part is
 * left out only for its text: the work of a tool in it is refused all the same.
 */
export function geminiOtherParts(p: object): string[] {
  return Object.entries(p).flatMap(([field, value]) => (value == null || GEMINI_PART_READ.has(field) ? [] : [field]));
}

/** Whether a value holds anything: anything but null, an empty string, and a list or object of nothing else. */
function holds(v: unknown): boolean {
  if (v == null || v === '') return false;
  if (Array.isArray(v)) return v.some(holds);
  if (typeof v === 'object') return Object.values(v).some(holds);
  return true;
}

/**
 * A Gemini candidate's grounding, to be named to extractSummary by its field (`SUMMARY_INVALID`) when it holds
 * anything: an answer grounded in a Google Search, Maps or retrieval (`groundingMetadata`: its queries, the pages and
 * chunks it rests on) or in pages fetched by the URL context tool (`urlContextMetadata`). The request offers neither;
 * an answer written from them is not a summary of the transcript alone. An empty one (`{}`, an empty list) is none.
 * `citationMetadata` is not read: it is the API's recitation check, marking a passage of the answer that matches a
 * source the model was trained on (a licence header, code from a public repository, often quoted in the transcript
 * itself), not anything looked up or run during the turn; an answer that recites too much is stopped by the API
 * (`RECITATION`, already `SUMMARY_INCOMPLETE`), and refusing one that cites would refuse faithful summaries of code.
 */
export function geminiGroundedIn(c: object): string[] {
  const fields = c as Record<string, unknown>;
  return ['groundingMetadata', 'urlContextMetadata'].filter((field) => holds(fields[field]));
}
