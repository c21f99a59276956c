#ifndef RL_APPROVAL_H
#define RL_APPROVAL_H

/* Approval gates (docs/cli.md, Approval gates): the one definition of a
 * proposal and of the bytes its digest covers. The ledger stores what
 * rl_approval_proposal builds; `runs show` displays, and `runs approve`
 * checks, the text rl_approval_canonical derives from the stored proposal,
 * which is the same text. */

#include <stddef.h>

/* 1 when the canonical effective request request_json carries
 * "approval": {"required": true}, 0 when it carries no approval (absent,
 * null or required false), RL_ERR_INVALID (negative) when it cannot be
 * read (NULL, not JSON, not an object) or its approval has another shape:
 * the gate fails closed, so a caller treats anything but 0 as gated. */
int rl_approval_required(const char *request_json);

/* Builds the proposal of a run from its effective request (destinations
 * from "notify") and its output:
 *   {"content":<output>,"destination":[{"channel":"..."},...],
 *    "operation":"notify"}
 * in canonical form (rl_json_canonical) into *canonical (malloc'd; the
 * caller frees it with free()) and the SHA-256 hex of that text into
 * digest (RL_HEX_SIZE bytes). Returns 0 or a negative rl_err with errstr
 * set and *canonical NULL. */
int rl_approval_proposal(const char *request_json, const char *output_json,
                         char **canonical, char *digest, char *errstr,
                         size_t errstr_size);

/* Canonical text and digest of a stored proposal (any JSON text, e.g. as
 * PostgreSQL prints a jsonb): the same bytes rl_approval_proposal hashed.
 * Ownership and errors as rl_approval_proposal. */
int rl_approval_canonical(const char *proposal_json, char **canonical,
                          char *digest, char *errstr, size_t errstr_size);

#endif /* RL_APPROVAL_H */
