#include "rl/kafka.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/log.h"
#include "rl/testing.h"

/* librdkafka's syslog levels go through the project logger so that a line
 * from librdkafka has the same shape as ours. */
static void
log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    enum rl_log_level lvl = level <= 3   ? RL_LOG_ERROR
                            : level <= 4 ? RL_LOG_WARN
                            : level <= 6 ? RL_LOG_INFO
                                         : RL_LOG_DEBUG;

    rl_log(lvl, NULL, "librdkafka %s %s: %s", rd_kafka_name(rk), fac, buf);
}

/* Properties Runledger sets itself and whose values its guarantees rest
 * on; an operator's RUNLEDGER_KAFKA_* must not change them. Aliases
 * librdkafka accepts for the same setting are listed too. */
static const struct {
    const char *name;
    const char *why;
} own_props[] = {
    {"enable.auto.offset.store",
     "offsets are stored only once a run is durable"},
    {"enable.auto.commit", "the stored durable prefix is committed by the "
                           "auto commit between rebalances"},
    {"auto.commit.enable", "the stored durable prefix is committed by the "
                           "auto commit between rebalances"},
    {"partition.assignment.strategy",
     "set by RUNLEDGER_PARTITION_ASSIGNOR: the rebalance callback handles the "
     "range and cooperative-sticky assignors"},
    {"auto.offset.reset",
     "a partition without a committed offset starts at its earliest event"},
    {"enable.idempotence", "dead letters and notifications are produced "
                           "idempotently, without duplicates or gaps"},
    {"acks", "a dead letter or notification counts as sent once every "
             "in-sync replica has it"},
    {"request.required.acks", "a dead letter or notification counts as "
                              "sent once every in-sync replica has it"},
};

const char *
rl_kafka_own_property(const char *name)
{
    for (size_t i = 0; i < sizeof(own_props) / sizeof(own_props[0]); i++) {
        if (strcmp(name, own_props[i].name) == 0)
            return own_props[i].why;
    }
    return NULL;
}

int
rl_kafka_props_check(const struct rl_config *cfg, char *errstr,
                     size_t errstr_size)
{
    for (size_t i = 0; i + 1 < cfg->kafka_props_count; i += 2) {
        const char *name = cfg->kafka_props[i];
        const char *why = rl_kafka_own_property(name);

        if (why) {
            snprintf(errstr, errstr_size,
                     "kafka property %s is set by runledger and cannot be "
                     "overridden: %s",
                     name, why);
            return RL_ERR_INVALID;
        }
    }
    return 0;
}

int
rl_kafka_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                  char *errstr, size_t errstr_size)
{
    char kerr[512];

    if (rd_kafka_conf_set(conf, name, value, kerr, sizeof(kerr)) !=
        RD_KAFKA_CONF_OK) {
        /* kerr may quote the value; a password must not reach the log. */
        snprintf(errstr, errstr_size, "could not set kafka property %s", name);
        return RL_ERR_INVALID;
    }
    return 0;
}

rd_kafka_conf_t *
rl_kafka_conf_new(const struct rl_config *cfg, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    rd_kafka_conf_set_log_cb(conf, log_cb);
    if (rl_kafka_conf_set(conf, "bootstrap.servers",
                          cfg->kafka_bootstrap_servers, errstr,
                          errstr_size) != 0)
        goto fail;
    for (size_t i = 0; i + 1 < cfg->kafka_props_count; i += 2) {
        if (rl_kafka_conf_set(conf, cfg->kafka_props[i],
                              cfg->kafka_props[i + 1], errstr,
                              errstr_size) != 0)
            goto fail;
    }
    return conf;

fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

rd_kafka_t *
rl_kafka_producer_new(rd_kafka_conf_t *conf, int idempotent, char *errstr,
                      size_t errstr_size)
{
    rd_kafka_t *rk;

    if (idempotent &&
        (rl_kafka_conf_set(conf, "enable.idempotence", "true", errstr,
                           errstr_size) != 0 ||
         rl_kafka_conf_set(conf, "acks", "all", errstr, errstr_size) != 0)) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, errstr_size);
    if (!rk)
        rd_kafka_conf_destroy(conf);
    return rk;
}

/* Before 2.6.1 librdkafka's cooperative protocol has known faults
 * (lost partitions after a failed incremental rebalance, waits in
 * rd_kafka_destroy), so auto keeps the eager range assignor there. */
const char *
rl_kafka_assignor(const struct rl_config *cfg)
{
    if (cfg->kafka_assignor && strcmp(cfg->kafka_assignor, "auto") != 0)
        return cfg->kafka_assignor;
    return rd_kafka_version() >= 0x020601ff ? "cooperative-sticky" : "range";
}

rd_kafka_conf_t *
rl_kafka_consumer_conf_new(const struct rl_config *cfg, const char *group_id,
                           char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rl_kafka_conf_new(cfg, errstr, errstr_size);

    if (!conf)
        return NULL;
    if (rl_kafka_conf_set(conf, "group.id", group_id, errstr, errstr_size) !=
            0 ||
        rl_kafka_conf_set(conf, "enable.auto.offset.store", "false", errstr,
                          errstr_size) != 0 ||
        rl_kafka_conf_set(conf, "enable.auto.commit", "true", errstr,
                          errstr_size) != 0 ||
        rl_kafka_conf_set(conf, "auto.offset.reset", "earliest", errstr,
                          errstr_size) != 0 ||
        rl_kafka_conf_set(conf, "partition.assignment.strategy",
                          rl_kafka_assignor(cfg), errstr, errstr_size) != 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

rd_kafka_t *
rl_kafka_consumer_new(const struct rl_config *cfg, rd_kafka_conf_t *conf,
                      const char *topic, char *errstr, size_t errstr_size)
{
    rd_kafka_topic_partition_list_t *topics;
    rd_kafka_resp_err_t err;
    rd_kafka_t *rk;

    /* Applied last so the operator's statistics.interval.ms and the like
     * win; none of them is one of ours (rl_kafka_props_check). */
    for (size_t i = 0; i + 1 < cfg->kafka_props_count; i += 2) {
        if (rl_kafka_conf_set(conf, cfg->kafka_props[i],
                              cfg->kafka_props[i + 1], errstr,
                              errstr_size) != 0) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, errstr_size);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, topic, RD_KAFKA_PARTITION_UA);
    err = rd_kafka_subscribe(rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (err) {
        snprintf(errstr, errstr_size, "could not subscribe to %s: %s", topic,
                 rd_kafka_err2str(err));
        rd_kafka_destroy(rk);
        return NULL;
    }
    return rk;
}

int
rl_kafka_topic_ensure(rd_kafka_t *rk, const char *topic, int partitions,
                      int timeout_ms, char *errstr, size_t errstr_size)
{
    rd_kafka_NewTopic_t *nt;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    const rd_kafka_CreateTopics_result_t *res;
    const rd_kafka_topic_result_t **results;
    size_t cnt;
    int ret = 0;
    char kerr[256];

    nt = rd_kafka_NewTopic_new(topic, partitions, -1, kerr, sizeof(kerr));
    if (!nt) {
        snprintf(errstr, errstr_size, "could not create topic %s: %s", topic,
                 kerr);
        return RL_ERR_KAFKA;
    }
    q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, timeout_ms);
    if (!ev) {
        snprintf(errstr, errstr_size, "could not create topic %s: timed out",
                 topic);
        ret = RL_ERR_KAFKA;
        goto done;
    }
    if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errstr_size, "could not create topic %s: %s", topic,
                 rd_kafka_event_error_string(ev));
        ret = RL_ERR_KAFKA;
        goto done;
    }
    res = rd_kafka_event_CreateTopics_result(ev);
    results = rd_kafka_CreateTopics_result_topics(res, &cnt);
    for (size_t i = 0; i < cnt; i++) {
        rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);

        if (err && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            snprintf(errstr, errstr_size, "could not create topic %s: %s",
                     topic, rd_kafka_err2str(err));
            ret = RL_ERR_KAFKA;
        }
    }

done:
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return ret;
}

int
rl_kafka_topic_retention_ms(rd_kafka_t *rk, const char *topic, int timeout_ms,
                            int64_t *retention_ms, char *errstr,
                            size_t errstr_size)
{
    rd_kafka_ConfigResource_t *cr;
    rd_kafka_AdminOptions_t *opts;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev = NULL;
    const rd_kafka_DescribeConfigs_result_t *res;
    const rd_kafka_ConfigResource_t **rs;
    const rd_kafka_ConfigEntry_t **entries;
    size_t nrs = 0, n = 0;
    int ret = RL_ERR_KAFKA;
    char kerr[256];

    cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    q = rd_kafka_queue_new(rk);
    if (!cr || !opts || !q) {
        snprintf(errstr, errstr_size,
                 "could not read the retention of topic %s: out of memory",
                 topic);
        goto done;
    }
    if (rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, kerr,
                                                  sizeof(kerr)) !=
        RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errstr_size,
                 "could not read the retention of topic %s: %s", topic, kerr);
        goto done;
    }
    rd_kafka_DescribeConfigs(rk, &cr, 1, opts, q);
    /* The request timeout answers first; the margin covers a broker that
     * never connects, so this wait always ends. */
    ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (!ev) {
        snprintf(errstr, errstr_size,
                 "could not read the retention of topic %s: timed out", topic);
        goto done;
    }
    if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errstr_size,
                 "could not read the retention of topic %s: %s", topic,
                 rd_kafka_event_error_string(ev));
        goto done;
    }
    res = rd_kafka_event_DescribeConfigs_result(ev);
    rs = res ? rd_kafka_DescribeConfigs_result_resources(res, &nrs) : NULL;
    if (nrs != 1) {
        snprintf(errstr, errstr_size,
                 "could not read the retention of topic %s: no answer", topic);
        goto done;
    }
    if (rd_kafka_ConfigResource_error(rs[0])) {
        snprintf(errstr, errstr_size,
                 "could not read the retention of topic %s: %s", topic,
                 rd_kafka_ConfigResource_error_string(rs[0]));
        goto done;
    }
    entries = rd_kafka_ConfigResource_configs(rs[0], &n);
    for (size_t i = 0; i < n; i++) {
        const char *value = rd_kafka_ConfigEntry_value(entries[i]);
        char *end;
        long long ms;

        if (strcmp(rd_kafka_ConfigEntry_name(entries[i]), "retention.ms") != 0)
            continue;
        if (!value) {
            snprintf(errstr, errstr_size,
                     "could not read the retention of topic %s: no value",
                     topic);
            goto done;
        }
        errno = 0;
        ms = strtoll(value, &end, 10);
        if (errno || *end || end == value || ms < -1) {
            snprintf(errstr, errstr_size,
                     "could not read the retention of topic %s: "
                     "retention.ms %s is not a number",
                     topic, value);
            goto done;
        }
        *retention_ms = ms;
        ret = 0;
        goto done;
    }
    snprintf(errstr, errstr_size,
             "could not read the retention of topic %s: no retention.ms",
             topic);

done:
    if (ev)
        rd_kafka_event_destroy(ev);
    if (q)
        rd_kafka_queue_destroy(q);
    if (opts)
        rd_kafka_AdminOptions_destroy(opts);
    if (cr)
        rd_kafka_ConfigResource_destroy(cr);
    return ret;
}
