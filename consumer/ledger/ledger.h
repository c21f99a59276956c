#ifndef RL_LEDGER_H
#define RL_LEDGER_H

/* The ledger thread body (ledger/loop.c). */
void *rl_ledger_main(void *arg);

#endif /* RL_LEDGER_H */
