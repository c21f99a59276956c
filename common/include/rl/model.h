#ifndef RL_MODEL_H
#define RL_MODEL_H

#include <stddef.h>

#include "rl/ratelimit_headers.h"

/* Model client: the only code that talks to the OpenAI-compatible endpoint.
 *
 * One struct rl_model per process owns one libcurl multi handle and one
 * thread (the model thread) that drives every call: hundreds to thousands
 * in flight over HTTP/1.1 keep-alive connections. Other threads submit
 * calls; each submitted call is delivered exactly once to the done()
 * callback, on the model thread, with its outcome classified before anyone
 * decides what to do with it (docs/design.md, "Failure classes").
 *
 * POST <base_url>/chat/completions[?<query>] carries:
 *   Authorization: Bearer <api_key>   (when api_key is set; with
 *                                      auth_header set, <auth_header>:
 *                                      <api_key> instead, e.g. Azure's
 *                                      api-key)
 *   Idempotency-Key: <run_id>         (the same for every retry of a run)
 *   Content-Type: application/json
 *   <headers>                         (static extra headers, if any)
 *
 * The API key and the values of the extra headers never appear in a log
 * line, an errstr or a call's error: CURLOPT_VERBOSE is never set (it
 * prints every header) and any echo of them in an endpoint's error message
 * is redacted. */

/* How a call ended, decided at the boundary so callers never look at curl
 * codes. */
enum rl_model_outcome {
    RL_MODEL_OK = 0,         /* 2xx with non-empty assistant content, or
                                with tool calls */
    RL_MODEL_TRANSIENT,      /* 408, 429 or 5xx: retry with backoff,
                                honouring retry_after_ms */
    RL_MODEL_PERMANENT,      /* any other 4xx (400, 401, 403, 404, 422, ...)
                                or an unexpected 1xx/3xx: do not retry */
    RL_MODEL_NOT_SENT,       /* DNS, connect or TLS failure before any
                                request byte left: retrying is safe */
    RL_MODEL_AMBIGUOUS,      /* timeout, reset or truncated response after
                                the request was sent: the endpoint may have
                                generated */
    RL_MODEL_INVALID_OUTPUT, /* 2xx but not JSON, neither content nor
                                tool calls, or a body over
                                max_response_bytes */
    RL_MODEL_CANCELLED,      /* rl_model_cancel() or rl_model_destroy()
                                before the call completed; request_sent
                                says whether the endpoint may have
                                generated anyway */
    RL_MODEL_NOT_FOUND       /* a lookup (rl_model_call.lookup) the endpoint
                                answered: it holds no record of that call
                                (yet: its records are eventually
                                consistent) */
};

/* The endpoint's API a call speaks. */
enum rl_model_api {
    RL_MODEL_API_CHAT = 0,  /* POST {base}/chat/completions; a lookup is
                               GET {base}/chat/completions?metadata[...] */
    RL_MODEL_API_RESPONSES, /* POST {base}/responses; a lookup is
                               GET {base}/responses/{lookup_id} */
};

/* The metadata keys a stored call carries (rl_model_body_prepare()). A
 * chat lookup lists a run's records by RL_MODEL_META_RUN_ID and adopts
 * only one whose other keys are its own: run IDs are deterministic, so
 * another ledger sending the same run (a staging copy, a second
 * installation on the same provider project) stores the same run ID and
 * attempt, never the same installation. */
#define RL_MODEL_META_RUN_ID "runledger_run_id"
#define RL_MODEL_META_ATTEMPT "runledger_attempt"
#define RL_MODEL_META_INSTALLATION "runledger_installation"
/* Beside RL_MODEL_META_INSTALLATION in a provider batch's metadata: the
 * system identifier of the database cluster whose ledger made it. A
 * ledger restored from a pg_dump keeps the installation id but lives in
 * another cluster, so the orphan sweep, which cancels only batches naming
 * both, never takes another environment's batches for its own. */
#define RL_MODEL_META_CLUSTER "runledger_cluster"
#define RL_MODEL_META_FINGERPRINT "runledger_fingerprint"
#define RL_MODEL_META_MODEL "runledger_model"

/* Short stable name of an outcome ("ok", "transient", "permanent",
 * "not_sent", "ambiguous", "invalid_output", "cancelled", "not_found");
 * "unknown" for any other value. Never NULL. */
const char *rl_model_outcome_name(enum rl_model_outcome outcome);

/* Settings of one model client. Zero values take the defaults. All strings
 * are copied by rl_model_new(). */
struct rl_model_config {
    const char *base_url;      /* e.g. "http://127.0.0.1:8080/v1"; required */
    const char *api_key;       /* NULL or "": no Authorization header */
    long connect_timeout_ms;   /* default 5000 */
    long timeout_ms;           /* whole call, default 120000 */
    size_t max_response_bytes; /* default 4 MiB; enforced while receiving */
    int max_connections;       /* connections to the endpoint at once and
                                  size of the connection cache; 0 (default)
                                  is unlimited: one per call in flight */
    const char *auth_header;   /* header carrying api_key: NULL, "" or
                                  "Authorization" sends "Authorization:
                                  Bearer <key>"; any other name (Azure:
                                  "api-key") sends "<name>: <key>" */
    const char *query;         /* NULL or "": none; else name=value pairs
                                  joined by '&', unescaped (e.g.
                                  "api-version=2024-10-21"); each name and
                                  value is percent-encoded onto the URL */
    const char *headers;       /* NULL or "": none; else "Name: value"
                                  entries separated by ',' or newlines (a
                                  value cannot hold a comma), sent on every
                                  call; values are treated as secrets */
};

/* Checks the settings rl_model_new() would refuse in auth_header, query,
 * headers and api_key, without starting anything (configuration loading
 * calls it so a bad value stops the process at once). Returns 0, or
 * RL_ERR_INVALID with errstr saying which entry is wrong and why; errstr
 * never holds the key nor a header's value. base_url is not checked. */
int rl_model_config_check(const struct rl_model_config *cfg, char *errstr,
                          size_t errstr_size);

#define RL_MODEL_DEFAULT_CONNECT_TIMEOUT_MS 5000L
#define RL_MODEL_DEFAULT_TIMEOUT_MS 120000L
#define RL_MODEL_DEFAULT_MAX_RESPONSE_BYTES ((size_t)4 * 1024 * 1024)

/* Longest run_id accepted as an Idempotency-Key. */
#define RL_MODEL_RUN_ID_MAX 128

/* One model request and its result.
 *
 * Zero the struct, set the inputs, submit. From rl_model_submit() until
 * done() is called for it the call belongs to the model: the caller must
 * neither change nor free it (rl_model_cancel() is the only thing it may do
 * with it). When done() runs the call is the caller's again, results set;
 * release text, tool_calls and model_name with rl_model_call_clear(). */
struct rl_model_call {
    /* Inputs. */
    const char *run_id;      /* sent as Idempotency-Key; copied at submit, so
                                borrowed only during rl_model_submit() */
    char *body;              /* JSON text to POST (malloc'd, e.g. from
                                rl_model_build_body()); rl_model_submit() takes
                                ownership and sets this to NULL */
    long timeout_ms;         /* 0: the model's timeout_ms; else this call's
                                total timeout (e.g. what is left of the run's
                                deadline) */
    void *opaque;            /* the caller's; never touched */
    const char *traceparent; /* NULL/"": none; else sent as the W3C
                                traceparent header (55 visible ASCII
                                characters); copied at submit */
    enum rl_model_api api;   /* the API the body speaks (chat: 0) */
    int lookup;              /* 0: POST body; 1: no body, GET the
                                endpoint's record of an earlier call
                                instead: for chat the stored completion
                                whose metadata names run_id, one of
                                lookup_attempts, lookup_installation
                                and lookup_fingerprint, and whose model
                                is lookup_model (the earliest of them);
                                for responses the response lookup_id.
                                Found: RL_MODEL_OK with the answer's
                                results, as a live answer's; none:
                                RL_MODEL_NOT_FOUND. Never a
                                generation */
    int attempt_no;          /* lookup (chat): the attempt looked up */
    const char *lookup_id;   /* lookup (responses): the response id;
                                copied at submit */
    /* lookup (chat): what a record must name to be adopted; borrowed
     * until done() runs. lookup_attempts NULL: attempt_no alone. */
    const int *lookup_attempts;
    int lookup_nattempts;
    const char *lookup_installation; /* NULL/"": not checked */
    const char *lookup_fingerprint;  /* NULL/"": not checked */
    const char *lookup_model;        /* NULL/"": not checked; else the
                                        record's metadata names it as
                                        the model asked for or, a record
                                        without that key, the model
                                        that answered is it or a dated
                                        snapshot of it ("<model>-...") */

    /* Results, valid when done() runs. */
    enum rl_model_outcome outcome;
    long http_status;                      /* 0 when no response arrived */
    char upstream_request_id[128];         /* the 2xx answer's "id", else the
                                              first of the response headers
                                              x-request-id, request-id,
                                              x-litellm-call-id,
                                              apim-request-id (also on 4xx,
                                              5xx and timeouts once headers
                                              arrived); "" if none */
    long retry_after_ms;                   /* Retry-After (seconds or
                                              HTTP-date) or retry-after-ms;
                                              -1 when absent */
    struct rl_ratelimit_headers ratelimit; /* the response's rate-limit
                                            headers (any status) */
    char *text;                            /* assistant content (malloc'd)
                                              when RL_MODEL_OK and non-empty,
                                              else NULL */
    char *tool_calls;                      /* the message's non-empty
                                              "tool_calls" array as JSON text
                                              (malloc'd) when RL_MODEL_OK, else
                                              NULL; an OK call has text,
                                              tool_calls or both */
    char *model_name;                      /* response "model" (malloc'd) or
                                              NULL */
    long long prompt_tokens;               /* usage, 0 when absent */
    long long completion_tokens;
    long long cached_tokens; /* usage.prompt_tokens_details.
                                cached_tokens, 0 when absent */
    long long latency_ms;    /* from the start of the transfer
                                to its end */
    int request_sent;        /* 1 if any request byte went out:
                                the line between NOT_SENT and
                                AMBIGUOUS */
    /* lookup (chat): the records read. found_attempt: the attempt the
     * adopted record names; found_records: the records that matched
     * (each a generation; more than one when an attempt was sent twice,
     * by a transport or a gateway, or several attempts generated);
     * found_extra_*: the usage of the matched records not adopted;
     * foreign_records: records naming run_id whose installation,
     * fingerprint or model is not the lookup's (never adopted). */
    int found_attempt;
    int found_records;
    int foreign_records;
    long long found_extra_prompt_tokens;
    long long found_extra_completion_tokens;
    long long found_extra_cached_tokens;
    char error[256]; /* why it was not RL_MODEL_OK
                        (lowercase, never the key nor
                        a header value; the endpoint's
                        message with control bytes
                        escaped as \n, \r, \t, \xNN);
                        "" when OK */
};

/* Frees text, tool_calls, model_name and body (if still set) and zeroes the
 * results so the struct can be submitted again; run_id, timeout_ms and opaque
 * stay. Accepts NULL. Never call it on a call the model owns. */
void rl_model_call_clear(struct rl_model_call *call);

struct rl_model;

/* Starts a model client and its thread. Returns NULL with errstr set when
 * the config is invalid or the thread cannot start.
 *
 * done(call, opaque) is called once per submitted call, on the model
 * thread, with no lock of the model held. It may call rl_model_submit(),
 * rl_model_cancel() and rl_model_in_flight(), never rl_model_destroy(), and
 * should return quickly: every other call waits while it runs. From its
 * start the call is the caller's again (it may free it there).
 * @locality any thread */
struct rl_model *rl_model_new(const struct rl_model_config *cfg,
                              void (*done)(struct rl_model_call *call,
                                           void *opaque),
                              void *opaque, char *errstr, size_t errstr_size);

/* Hands call to the model thread. Returns 0, after which done() will run
 * for it exactly once; or RL_ERR_INVALID (no run_id, a run_id with control
 * characters or longer than RL_MODEL_RUN_ID_MAX, no body (a lookup: a body,
 * or no lookup_id for responses or attempt_no for chat), text, tool_calls
 * or model_name still set from an earlier use, model shutting down), in which
 * case nothing changed and the caller still owns call and body.
 * @locality any thread
 * @locks m's queue lock, briefly */
int rl_model_submit(struct rl_model *m, struct rl_model_call *call);

/* Stops call: the model thread aborts its transfer (closing the
 * connection if the request is under way) and delivers it to done() with
 * RL_MODEL_CANCELLED, even if a response had just arrived. Returns 0 when
 * that is guaranteed, or RL_ERR_NOTFOUND when call is not pending (never
 * submitted, or done() already runs or ran for it with its real outcome).
 * call is only compared, never dereferenced, so a stale pointer is safe.
 * @locality any thread (including inside done())
 * @locks m's queue lock, briefly; O(calls in flight) */
int rl_model_cancel(struct rl_model *m, struct rl_model_call *call);

/* Stops the model thread: every call still pending is delivered to done()
 * with RL_MODEL_CANCELLED (on the model thread, before this returns), then
 * the connections close. Accepts NULL.
 * @locality any thread but the model thread */
void rl_model_destroy(struct rl_model *m);

/* Builds the chat completion body to POST for one run.
 *
 * request_json is the stored effective request
 *   {"notify": [...], "request": {"model": "...", "messages": [...], ...}}
 * and raw_input_json the run's collected input (JSON text, or NULL).
 * The body is the "request" object with these changes only:
 * - in every message, each occurrence of the literal "{{input}}" in a
 *   string "content" (or in the "text" of a {"type":"text"} part of an
 *   array "content") is replaced by raw_input_json verbatim ("null" when
 *   raw_input_json is NULL);
 * - if no message contains "{{input}}" and raw_input_json is neither NULL
 *   nor "null", one final message
 *   {"role": "user", "content": "Input:\n<raw_input_json>"} is appended;
 * - "stream" is forced to false and "stream_options" removed: the client
 *   reads one JSON response.
 * Everything else (model, temperature, tools, response_format, ...) is
 * passed through unchanged, so the same inputs always give the same body.
 *
 * Returns the body (malloc'd, free with free(); ready to hand over as
 * rl_model_call.body), or NULL with errstr set when request_json is not
 * JSON, has no "request" object, or that has no string "model" or no
 * non-empty "messages" array of objects. */
char *rl_model_build_body(const char *request_json, const char *raw_input_json,
                          char *errstr, size_t errstr_size);

/* Sets *size to the length of the body rl_model_build_body() returns for
 * the same arguments, without substituting: the placeholders are counted
 * and the input's printed (escaped) length multiplied by their number, so
 * a prompt that repeats "{{input}}" costs no more to measure than to
 * parse. Returns RL_OK, RL_ERR_INVALID (errstr set: a request
 * rl_model_build_body() refuses too) or RL_ERR_NOMEM. A size beyond
 * SIZE_MAX saturates. @locality any thread */
int rl_model_body_size(const char *request_json, const char *raw_input_json,
                       size_t *size, char *errstr, size_t errstr_size);

/* What rl_model_body_prepare() makes of a chat body. */
struct rl_model_body_opts {
    enum rl_model_api api;    /* the endpoint's default API */
    const char *api_by_model; /* NULL/"": none; else "model=chat|responses"
                                 entries separated by ',': the API a model
                                 named there speaks, over api */
    int store;                /* 1: "store": true and "metadata" naming
                                 run_id, attempt_no, installation_id and
                                 fingerprint (the request's own metadata
                                 kept), so the endpoint keeps a record a
                                 lookup can find and tell from another
                                 ledger's */
    const char *run_id;
    int attempt_no;
    const char *installation_id; /* NULL/"": not sent */
    const char *fingerprint;     /* the run's request fingerprint; NULL/"":
                                    not sent */
};

/* The body to send for one attempt, from chat_body (what
 * rl_model_build_body() returns; borrowed): with opts->store, "store": true
 * and "metadata" {RL_MODEL_META_RUN_ID: run_id, RL_MODEL_META_ATTEMPT:
 * "<attempt_no>", RL_MODEL_META_INSTALLATION: installation_id,
 * RL_MODEL_META_FINGERPRINT: fingerprint, RL_MODEL_META_MODEL: the
 * request's model} merged into the request's metadata; for a model whose
 * API is responses, the request rewritten for POST /responses: messages
 * become "input" (text parts input_text, or output_text for the
 * assistant's; image_url parts input_image), max_tokens or
 * max_completion_tokens max_output_tokens, response_format text.format,
 * function tools and tool_choice flattened; everything else passes.
 * *api is set to the API the body speaks. Returns the body (malloc'd) or
 * NULL with errstr set (chat_body is not a JSON object with a "model"
 * string, api_by_model names an unknown API, out of memory). */
char *rl_model_body_prepare(const char *chat_body,
                            const struct rl_model_body_opts *opts,
                            enum rl_model_api *api, char *errstr,
                            size_t errstr_size);

/* Reads an API name ("chat" or "responses") into *api. Returns 0 or
 * RL_ERR_INVALID. */
int rl_model_api_parse(const char *name, enum rl_model_api *api);

/* The API model speaks: the entry of api_by_model naming it, else def (a
 * malformed setting counts as none; rl_model_api_map_check() refuses it
 * when the configuration is loaded). */
enum rl_model_api rl_model_api_for(const char *api_by_model,
                                   enum rl_model_api def, const char *model);

/* Checks an api_by_model setting ("model=chat|responses,..."). Returns 0 or
 * RL_ERR_INVALID with errstr naming the bad entry. */
int rl_model_api_map_check(const char *api_by_model, char *errstr,
                           size_t errstr_size);

/* The accepted result of an RL_MODEL_OK call, as stored in runs.output and
 * carried by the default notification envelope:
 *   {"text": "..." | null,
 *    "tool_calls": [...],          (only when the answer called tools)
 *    "model": "..." | null,        (the model that answered, as the
 *                                   endpoint or gateway named it)
 *    "upstream_request_id": "..." | null,
 *    "usage": {"prompt_tokens": N, "completion_tokens": N,
 *              "cached_tokens": N}}
 * Returns it (malloc'd, free with free()), or NULL when call is not OK or
 * has neither text nor tool calls, or on allocation failure. */
char *rl_model_output_json(const struct rl_model_call *call);

#endif /* RL_MODEL_H */
