/* console_proposal: prints the proposal a worker would store for a run
 * whose effective request is argv[1] and whose model output is argv[2],
 * built by the production code (rl_approval_proposal): its digest on the
 * first line, its canonical text on the second. The console tests store
 * it on a run as the fixture of an approval page, so the digest they
 * expect is the one the service computes, never a copy of its rules. */
#include <stdio.h>
#include <stdlib.h>

#include "rl/approval.h"
#include "rl/runid.h"

int
main(int argc, char **argv)
{
    char digest[RL_HEX_SIZE], errstr[256];
    char *canonical = NULL;

    if (argc != 3) {
        fprintf(stderr, "usage: console_proposal REQUEST_JSON OUTPUT_JSON\n");
        return 2;
    }
    if (rl_approval_proposal(argv[1], argv[2], &canonical, digest, errstr,
                             sizeof(errstr)) != 0) {
        fprintf(stderr, "console_proposal: %s\n", errstr);
        return 1;
    }
    printf("%s\n%s\n", digest, canonical);
    free(canonical);
    return 0;
}
