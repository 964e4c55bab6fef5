/**
 * The model adapter seam: one function from a request to a response. Any provider SDK fits behind it
 * (a few lines map `ModelRequest` to the provider's call and its reply back to `ModelResponse`), and
 * tests drive compaction with a scripted model instead of a network.
 */

/** One message of the model's context. `tool` messages carry a tool result for `toolCallId`. */
export interface ModelMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** For `tool` messages: the call this result answers. */
  toolCallId?: string | undefined;
  /** For `assistant` messages that called tools. */
  toolCalls?: ModelToolCall[] | undefined;
}

/** A tool the model may call: name, description, and the JSON Schema of its input. */
export interface ModelToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** Structured output: the model's whole answer must be JSON matching `schema`. */
export interface ModelResponseFormat {
  type: 'json_schema';
  name: string;
  description?: string | undefined;
  schema: Record<string, unknown>;
  /**
   * Provider "strict" modes require every property to be required; the summary schema has optional
   * fields, so this is false here. The adapters (src/adapters) send each API its own form instead
   * (`summarySchemaFor`), strict where the API has it; the library validates the answer in any case.
   */
  strict: boolean;
}

export interface ModelRequest {
  /**
   * What the Harness wants: a normal turn, or a compaction summary (`compactionRequest` and `compact` always ask for
   * `compaction`). A Harness's own adapter may serve both; the adapters of `handoff-ledger/adapters/*` are for
   * compaction only and refuse any other purpose (`INVALID_ARGUMENT`).
   */
  purpose: 'turn' | 'compaction';
  messages: ModelMessage[];
  tools?: ModelToolDefinition[] | undefined;
  /** `{ name }` forces that tool; `'none'` forbids tools. */
  toolChoice?: 'auto' | 'none' | { name: string } | undefined;
  responseFormat?: ModelResponseFormat | undefined;
  maxOutputTokens?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** A tool call as the provider returned it. `input` is parsed JSON, or the raw string if unparsed. */
export interface ModelToolCall {
  id: string;
  name: string;
  input: unknown;
}

/**
 * Why the model stopped. Only `stop` and `tool_calls` mean a finished answer; `length` means the answer
 * was cut off at the output-token limit, `content_filter` that a provider's content filter stopped or withheld it
 * (`SUMMARY_INCOMPLETE`, as `length`), `refusal` that the model declined to answer (`MODEL_REFUSED`; its words, if
 * any, in `refusal`).
 */
export type ModelFinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'refusal' | 'other';

export interface ModelResponse {
  finishReason: ModelFinishReason;
  /** The answer text (for structured output: the JSON text). */
  text?: string | undefined;
  /** Structured output the provider already parsed, when it does so. */
  output?: unknown;
  toolCalls?: ModelToolCall[] | undefined;
  /** The model's explanation when it refused (`finishReason: 'refusal'`). */
  refusal?: string | undefined;
  /**
   * The provider's own reason, as it came, for an answer that did not finish (any `finishReason` but `stop`,
   * `tool_calls` and `refusal`): Anthropic's `pause_turn`, Gemini's `MALFORMED_FUNCTION_CALL`, a Responses status
   * `cancelled`, what `other` stands for. Named (quoted, bounded) in the `SUMMARY_INCOMPLETE` message; it changes no
   * outcome. The ready adapters set it.
   */
  providerReason?: string | undefined;
}

/** The adapter a Harness supplies: its provider call, mapped to these shapes. */
export type ModelAdapter = (request: ModelRequest) => Promise<ModelResponse>;
