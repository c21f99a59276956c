/* exec.c: the two shapes most one-off statements take (one text value, one
 * write), and the ad hoc statement of tests (rl_db_exec). Unprepared: a
 * command runs each once. */
#include <stdlib.h>

#include "db_int.h"
#include "rl/err.h"

int
rl_db_exec(struct rl_db *db, const char *sql, int nparams,
           const char *const *params, char *value, size_t value_size,
           char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    if (value && value_size)
        value[0] = '\0';
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         "run statement");
    if (!res)
        return err;
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        rows = PQntuples(res);
        if (value && value_size && rows > 0 && PQnfields(res) > 0)
            db_copy_value(res, 0, 0, value, value_size);
    } else {
        rows = atoi(PQcmdTuples(res));
    }
    PQclear(res);
    return rows;
}

/* One text value of a one-row result into a malloc'd string. */
int
db_one_text(struct rl_db *db, const char *sql, int nparams,
            const char *const *params, const char *what, char **out,
            char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    *out = NULL;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         what);
    if (!res)
        return err;
    if (PQntuples(res) == 0) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "could not %s: no such run", what);
        return RL_ERR_NOTFOUND;
    }
    *out = db_dup_value(res, 0, 0, &oom);
    PQclear(res);
    if (oom || !*out) {
        free(*out);
        *out = NULL;
        rl_set_err(errstr, errstr_size, "could not %s: out of memory", what);
        return RL_ERR_NOMEM;
    }
    return 0;
}

/* An operator's write: the configured schema, then one statement. *rows
 * (may be NULL) receives the rows it touched. Returns 0 or the error, with
 * errstr "could not <what>: ...". */
int
db_write(struct rl_db *db, const char *sql, int nparams,
         const char *const *params, const char *what, int *rows, char *errstr,
         size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         what);
    if (!res)
        return err;
    if (rows)
        *rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return 0;
}
