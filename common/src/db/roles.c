/* roles.c: the ledger's database roles, prepared by `runledger migrate`
 * before it applies anything: the five group roles exist (created when
 * the migrating user may, else expected), the migrating user can act as
 * runledger_owner, every role may use the ledger's schema, and whatever
 * the migrating user created there earlier belongs to runledger_owner.
 * migrate then works as runledger_owner, so each object it creates is the
 * owner's; the grants of the other roles are migrations (072 and on). */
#include <stdio.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_migrate.h"
#include "rl/err.h"

/* Compiled-in text with no input in it: the role names are constants and
 * the schema is the session's, quoted by format(%I) on the server. Every
 * step is skipped when already done, so a second migrate changes
 * nothing, and a user that may not create roles or grant on the schema
 * gets through when a database administrator did it beforehand
 * (docs/deploying.md, Database roles). */
static const char prepare_roles[] =
    "DO $roles$\n"
    "DECLARE\n"
    "  r text;\n"
    "  obj record;\n"
    "  fn regprocedure;\n"
    "  ledger text := current_schema();\n"
    "BEGIN\n"
    "  IF ledger IS NULL THEN\n"
    "    RAISE EXCEPTION 'no schema of the search_path exists';\n"
    "  END IF;\n"
    "  FOREACH r IN ARRAY ARRAY['runledger_owner', 'runledger_worker',\n"
    "      'runledger_console', 'runledger_relay', 'runledger_readonly'] LOOP\n"
    "    CONTINUE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r);\n"
    "    BEGIN\n"
    "      EXECUTE format('CREATE ROLE %I NOLOGIN', r);\n"
    "    EXCEPTION\n"
    "      WHEN duplicate_object OR unique_violation THEN NULL;\n"
    "      WHEN insufficient_privilege THEN\n"
    "        RAISE EXCEPTION 'role % does not exist and % may not create "
    "roles', r, current_user\n"
    "          USING HINT = 'create the runledger roles as docs/deploying.md "
    "(Database roles) shows, then run migrate again';\n"
    "    END;\n"
    "  END LOOP;\n"
    "  IF NOT pg_has_role('runledger_owner', 'MEMBER') THEN\n"
    "    BEGIN\n"
    "      EXECUTE format('GRANT runledger_owner TO %I', current_user);\n"
    "    EXCEPTION WHEN insufficient_privilege THEN\n"
    "      RAISE EXCEPTION '% is not a member of runledger_owner and may not "
    "become one', current_user\n"
    "        USING HINT = format('GRANT runledger_owner TO %I', "
    "current_user);\n"
    "    END;\n"
    "  END IF;\n"
    "  IF NOT has_schema_privilege('runledger_owner', ledger, 'CREATE') THEN\n"
    "    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO "
    "runledger_owner', ledger);\n"
    "  END IF;\n"
    "  FOREACH r IN ARRAY ARRAY['runledger_worker', 'runledger_console',\n"
    "      'runledger_relay', 'runledger_readonly'] LOOP\n"
    "    IF NOT has_schema_privilege(r, ledger, 'USAGE') THEN\n"
    "      EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', ledger, r);\n"
    "    END IF;\n"
    "  END LOOP;\n"
    "  FOREACH r IN ARRAY ARRAY['runledger_owner', 'runledger_worker',\n"
    "      'runledger_console', 'runledger_relay', 'runledger_readonly'] LOOP\n"
    "    IF NOT has_schema_privilege(r, ledger, 'USAGE') THEN\n"
    "      RAISE EXCEPTION '% may not use schema %', r, ledger\n"
    "        USING HINT = format('GRANT USAGE ON SCHEMA %I TO %I', ledger, "
    "r);\n"
    "    END IF;\n"
    "  END LOOP;\n"
    "  IF NOT has_schema_privilege('runledger_owner', ledger, 'CREATE') THEN\n"
    "    RAISE EXCEPTION 'runledger_owner may not create in schema %', "
    "ledger\n"
    "      USING HINT = format('GRANT USAGE, CREATE ON SCHEMA %I TO "
    "runledger_owner', ledger);\n"
    "  END IF;\n"
    /* Tables first: an identity or serial sequence follows its table. */
    "  FOR obj IN\n"
    "    SELECT c.oid::regclass AS name,\n"
    "           CASE c.relkind WHEN 'v' THEN 'VIEW'\n"
    "                          WHEN 'm' THEN 'MATERIALIZED VIEW'\n"
    "                          WHEN 'S' THEN 'SEQUENCE'\n"
    "                          ELSE 'TABLE' END AS kind\n"
    "      FROM pg_class c\n"
    "     WHERE c.relnamespace = ledger::regnamespace\n"
    "       AND c.relowner = current_user::regrole\n"
    "       AND c.relkind IN ('r', 'p', 'v', 'm', 'S')\n"
    "       AND NOT (c.relkind = 'S' AND EXISTS (\n"
    "             SELECT 1 FROM pg_depend d\n"
    "              WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid\n"
    "                AND d.deptype IN ('a', 'i')))\n"
    "     ORDER BY c.relkind = 'S', c.oid\n"
    "  LOOP\n"
    "    EXECUTE format('ALTER %s %s OWNER TO runledger_owner', obj.kind, "
    "obj.name);\n"
    "  END LOOP;\n"
    "  FOR fn IN\n"
    "    SELECT p.oid::regprocedure FROM pg_proc p\n"
    "     WHERE p.pronamespace = ledger::regnamespace\n"
    "       AND p.proowner = current_user::regrole\n"
    "       AND p.prokind = 'f'\n"
    "  LOOP\n"
    "    EXECUTE format('ALTER FUNCTION %s OWNER TO runledger_owner', fn);\n"
    "  END LOOP;\n"
    "END\n"
    "$roles$";

int
db_roles_prepare(struct rl_db *db, char *errstr, size_t errstr_size)
{
    /* A DO block is one statement of compiled-in text; PQexec because it
     * has no parameters to bind. */
    PGresult *res = PQexec(db->conn, prepare_roles);

    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);

        db_fail_msg(db, res, errstr, errstr_size, "prepare the database roles");
        if (hint) {
            size_t used = strlen(errstr);

            snprintf(errstr + used, errstr_size - used, " (%s)", hint);
        }
        PQclear(res);
        return RL_ERR_DB;
    }
    PQclear(res);
    return 0;
}

int
db_roles_act_as_owner(struct rl_db *db, int on, char *errstr,
                      size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    res = db_exec_simple(db, on ? "SET ROLE runledger_owner" : "RESET ROLE", 0,
                         NULL, &err, errstr, errstr_size,
                         on ? "act as runledger_owner"
                            : "act as the migrating user again");
    if (!res)
        return err;
    PQclear(res);
    return 0;
}
