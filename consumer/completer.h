#ifndef RL_COMPLETER_H
#define RL_COMPLETER_H

/* The completer thread body (completer.c): completes the answers the ledger
 * hands it, in batches, on its own connection, and hands each run back on
 * pl->landed. Ends once completer_stop is set and nothing is left. */
void *rl_completer_main(void *arg);

#endif /* RL_COMPLETER_H */
