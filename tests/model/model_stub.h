/* A private copy of the stub model server (tests/stub/stub_model.py) for
 * the model client's tests that need settings the shared one lacks. */
#ifndef RL_TEST_MODEL_STUB_H
#define RL_TEST_MODEL_STUB_H

#include <sys/types.h>

/* Starts the stub on a free port with args (NULL-terminated, after
 * `--port 0`; NULL: none) and env ("NAME=value" each, NULL-terminated;
 * NULL: none) set in its environment; its port into *port once it
 * listens. Returns its pid; the caller stops it (model_stub_stop). */
pid_t model_stub_start(const char *const *args, const char *const *env,
                       int *port);

/* SIGTERM, then waits for it. */
void model_stub_stop(pid_t pid);

#endif /* RL_TEST_MODEL_STUB_H */
