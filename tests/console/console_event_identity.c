/* console_event_identity: prints the run ID and the fingerprint of the
 * schedule event argv[1] (a JSON object, as `runledger publish --stdin`
 * reads one), computed by the production parser (rl_event_parse) as the
 * consumer computes them when it registers the run. The schedules page's
 * test stores runs under them, so the run a window expects is the one the
 * service would register, never a copy of its rules. */
#include <stdio.h>
#include <string.h>

#include "rl/event.h"

int
main(int argc, char **argv)
{
    struct rl_event_limits limits;
    struct rl_event *ev;
    char reason[96], errstr[256];

    if (argc != 2) {
        fprintf(stderr, "usage: console_event_identity EVENT_JSON\n");
        return 2;
    }
    rl_event_limits_default(&limits);
    ev = rl_event_parse(argv[1], strlen(argv[1]), &limits, reason,
                        sizeof(reason), errstr, sizeof(errstr));
    if (!ev) {
        fprintf(stderr, "console_event_identity: %s\n", errstr);
        return 1;
    }
    printf("%s %s\n", ev->run_id, ev->fingerprint);
    rl_event_destroy(ev);
    return 0;
}
