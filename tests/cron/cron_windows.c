/* cron_windows: prints the window starts rl_cron_next gives, for the
 * comparison with croniter (compare_croniter.py). Reads lines
 * "EXPR<TAB>ZONE<TAB>AFTER<TAB>UNTIL<TAB>MAX" (epochs in seconds) and
 * writes, per line, the starts in (AFTER, UNTIL], at most MAX, separated by
 * spaces, or "error: ..." when the expression or zone is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/cron.h"
#include "rl/tz.h"

int
main(void)
{
    char line[1024];

    while (fgets(line, sizeof(line), stdin)) {
        char *save = NULL;
        char *expr = strtok_r(line, "\t", &save);
        char *zone = strtok_r(NULL, "\t", &save);
        char *after_s = strtok_r(NULL, "\t", &save);
        char *until_s = strtok_r(NULL, "\t", &save);
        char *max_s = strtok_r(NULL, "\t\n", &save);
        struct rl_cron cron;
        struct rl_tz *tz;
        char errstr[256];
        long long t, until;
        long max;

        if (!max_s) {
            fprintf(stderr, "cron_windows: malformed line\n");
            return 2;
        }
        t = strtoll(after_s, NULL, 10);
        until = strtoll(until_s, NULL, 10);
        max = strtol(max_s, NULL, 10);
        if (rl_cron_parse(expr, 0, &cron, errstr, sizeof(errstr)) != 0) {
            printf("error: %s\n", errstr);
            continue;
        }
        tz = rl_tz_load(zone, errstr, sizeof(errstr));
        if (!tz) {
            printf("error: %s\n", errstr);
            continue;
        }
        for (long i = 0; i < max; i++) {
            t = rl_cron_next(&cron, tz, t);
            if (t < 0 || t > until)
                break;
            printf(i ? " %lld" : "%lld", t);
        }
        printf("\n");
        fflush(stdout);
        rl_tz_destroy(tz);
    }
    return 0;
}
