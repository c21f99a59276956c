/* pool.c: the console's ledger connections. Each is used by one request
 * at a time; a request borrows one for as long as it answers and gives
 * it back when it is done. */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "console_int.h"
#include "rl/db_conn.h"
#include "rl/db_console.h"
#include "rl/log.h"

/* How long a request waits for a free ledger connection before it is
 * answered 503. */
#define CONSOLE_POOL_WAIT_S 5

int
console_pool_take(struct console *c, struct console_req *r)
{
    struct timespec until;
    char errstr[512];
    int slot = -1;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CONSOLE_POOL_WAIT_S;
    pthread_mutex_lock(&c->pool_lock);
    for (;;) {
        for (int i = 0; i < CONSOLE_DB_POOL && slot < 0; i++) {
            if (!c->busy[i])
                slot = i;
        }
        if (slot >= 0)
            break;
        if (pthread_cond_timedwait(&c->pool_free, &c->pool_lock, &until) ==
            ETIMEDOUT)
            break;
    }
    if (slot >= 0)
        c->busy[slot] = 1;
    pthread_mutex_unlock(&c->pool_lock);
    if (slot < 0)
        return -1;
    r->db_slot = slot;
    /* A connection the server dropped is reopened here, by the request
     * that needs it, outside the pool's lock. */
    if (c->db[slot] &&
        rl_db_console_check(c->db[slot], errstr, sizeof(errstr)) != 0) {
        rl_log_warn(NULL, "console: ledger connection lost: %s", errstr);
        rl_db_destroy(c->db[slot]);
        c->db[slot] = NULL;
    }
    if (!c->db[slot]) {
        c->db[slot] = rl_db_connect_role(c->cfg, RL_DB_ROLE_CONSOLE, errstr,
                                         sizeof(errstr));
        if (!c->db[slot])
            rl_log_warn(NULL, "console: %s", errstr);
    }
    r->db = c->db[slot];
    return r->db ? 0 : -1;
}

void
console_pool_give(struct console *c, struct console_req *r)
{
    if (r->db_slot < 0)
        return;
    pthread_mutex_lock(&c->pool_lock);
    c->busy[r->db_slot] = 0;
    pthread_cond_signal(&c->pool_free);
    pthread_mutex_unlock(&c->pool_lock);
    r->db_slot = -1;
    r->db = NULL;
}
