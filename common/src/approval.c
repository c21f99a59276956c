/* approval.c: the proposal of an approval-required run and its digest
 * (rl/approval.h). One serialisation, used by the ledger that stores the
 * proposal and by the operator commands that display and approve it. */
#include "rl/approval.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/json.h"
#include "rl/runid.h"

int
rl_approval_required(const char *request_json)
{
    cJSON *root = request_json ? cJSON_Parse(request_json) : NULL;
    const cJSON *approval = cJSON_GetObjectItemCaseSensitive(root, "approval");
    const cJSON *required =
        cJSON_GetObjectItemCaseSensitive(approval, "required");
    int ret;

    /* Fails closed: a request that cannot be read, or a gate of another
     * shape than the event parser writes, is not "no gate". */
    if (!cJSON_IsObject(root))
        ret = RL_ERR_INVALID;
    else if (!approval || cJSON_IsNull(approval))
        ret = 0;
    else if (!cJSON_IsObject(approval) || !cJSON_IsBool(required))
        ret = RL_ERR_INVALID;
    else
        ret = cJSON_IsTrue(required) ? 1 : 0;
    cJSON_Delete(root);
    return ret;
}

/* Canonical text of item and its digest into the caller's buffers. */
static int
digest_of(const cJSON *item, char **canonical, char *digest, char *errstr,
          size_t errstr_size)
{
    char detail[256];

    *canonical = rl_json_canonical(item, detail, sizeof(detail));
    if (!*canonical) {
        snprintf(errstr, errstr_size, "could not serialise the proposal: %s",
                 detail);
        return RL_ERR_INVALID;
    }
    if (rl_sha256_hex(*canonical, strlen(*canonical), digest) != RL_OK) {
        free(*canonical);
        *canonical = NULL;
        snprintf(errstr, errstr_size,
                 "could not compute the proposal digest: sha-256 failed");
        return RL_ERR_NOMEM;
    }
    return RL_OK;
}

int
rl_approval_proposal(const char *request_json, const char *output_json,
                     char **canonical, char *digest, char *errstr,
                     size_t errstr_size)
{
    cJSON *request = cJSON_Parse(request_json ? request_json : "");
    cJSON *proposal = cJSON_CreateObject();
    cJSON *content = cJSON_Parse(output_json ? output_json : "");
    cJSON *destination;
    const cJSON *notify = cJSON_GetObjectItemCaseSensitive(request, "notify");
    const cJSON *ch;
    int err = RL_ERR_NOMEM;

    *canonical = NULL;
    if (!request || !content) {
        snprintf(errstr, errstr_size,
                 "could not build the proposal: %s is not valid json",
                 request ? "the output" : "the effective request");
        err = RL_ERR_INVALID;
        goto done;
    }
    if (!proposal)
        goto oom;
    /* Ownership of content passes to the proposal. */
    cJSON_AddItemToObject(proposal, "content", content);
    content = NULL;
    destination = cJSON_AddArrayToObject(proposal, "destination");
    if (!destination)
        goto oom;
    cJSON_ArrayForEach(ch, notify)
    {
        cJSON *dest = cJSON_CreateObject();

        if (!dest)
            goto oom;
        cJSON_AddItemToArray(destination, dest);
        if (!cJSON_IsString(ch) ||
            !cJSON_AddStringToObject(dest, "channel", ch->valuestring))
            goto oom;
    }
    if (!cJSON_AddStringToObject(proposal, "operation", "notify"))
        goto oom;
    err = digest_of(proposal, canonical, digest, errstr, errstr_size);
    goto done;

oom:
    snprintf(errstr, errstr_size,
             "could not build the proposal: out of memory");
    err = RL_ERR_NOMEM;
done:
    cJSON_Delete(content);
    cJSON_Delete(proposal);
    cJSON_Delete(request);
    return err;
}

int
rl_approval_canonical(const char *proposal_json, char **canonical, char *digest,
                      char *errstr, size_t errstr_size)
{
    cJSON *proposal = cJSON_Parse(proposal_json ? proposal_json : "");
    int err;

    *canonical = NULL;
    if (!proposal) {
        snprintf(errstr, errstr_size,
                 "could not read the proposal: not valid json");
        return RL_ERR_INVALID;
    }
    err = digest_of(proposal, canonical, digest, errstr, errstr_size);
    cJSON_Delete(proposal);
    return err;
}
