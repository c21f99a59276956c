// Peer for `make bench`: River (github.com/riverqueue/river), a Go job
// queue on PostgreSQL, in front of the model. One Go process:
//
//	franz-go consumer group -> River InsertMany, one job per event, unique
//	by run_id (UniqueOpts ByArgs on the run_id field: a duplicate event
//	while the job exists inserts nothing; duplicates within one poll are
//	dropped first); the offsets are committed after InsertMany returned.
//	River workers (PEER_CONCURRENCY, default 100) -> POST the stub
//	(net/http, keep-alive) -> one transaction: INSERT the output into
//	bench_results, INSERT one outbox row per channel of the event, and
//	river.JobCompleteTx -> COMMIT.
//
// The outbox rows are written, not produced to Kafka: like the Python
// peer's outbox before its relay step, not after it.
//
// Environment: DATABASE_URL, KAFKA_BOOTSTRAP_SERVERS, MODEL_BASE_URL,
// PEER_TOPIC, PEER_GROUP_ID, PEER_CONCURRENCY (default 100), PEER_POOL
// (connections, default 40), PEER_FETCH_COOLDOWN_MS (default 2) and
// PEER_FETCH_POLL_MS (default 20): the fetch settings River's own
// benchmark uses, which it finds much faster than the defaults (100 ms, 1 s).
//
//	peer_river --init    River's migrations, bench_results and outbox
//	peer_river           run until SIGTERM
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/twmb/franz-go/pkg/kgo"
)

const schema = `
CREATE TABLE IF NOT EXISTS bench_results (
    run_id       text PRIMARY KEY,
    output       jsonb NOT NULL,
    completed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS outbox (
    run_id       text NOT NULL,
    channel      text NOT NULL,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    PRIMARY KEY (run_id, channel)
);`

// The event as tests/bench/gen_events.py writes it.
type event struct {
	Job         string          `json:"job"`
	Tenant      string          `json:"tenant"`
	ScheduledAt string          `json:"scheduled_at"`
	Version     string          `json:"version"`
	Input       json.RawMessage `json:"input"`
	Request     json.RawMessage `json:"request"`
	Notify      []string        `json:"notify"`
}

// The job's arguments; only run_id takes part in uniqueness.
type runArgs struct {
	RunID   string          `json:"run_id" river:"unique"`
	Job     string          `json:"job"`
	Tenant  string          `json:"tenant"`
	Input   json.RawMessage `json:"input"`
	Request json.RawMessage `json:"request"`
	Notify  []string        `json:"notify"`
}

func (runArgs) Kind() string { return "rl_run" }

func (runArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Same identity as Runledger's and the other peers'.
func runID(ev *event) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{strings.TrimSpace(ev.Job),
		strings.TrimSpace(ev.Tenant), ev.ScheduledAt, strings.TrimSpace(ev.Version)}, "|")))
	return hex.EncodeToString(sum[:])
}

type runWorker struct {
	river.WorkerDefaults[runArgs]
	pool     *pgxpool.Pool
	http     *http.Client
	modelURL string
}

func (w *runWorker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	a := job.Args
	var body map[string]any
	if err := json.Unmarshal(a.Request, &body); err != nil {
		return fmt.Errorf("could not decode the request: %w", err)
	}
	input := string(a.Input)
	if input == "" {
		input = "null"
	}
	if msgs, ok := body["messages"].([]any); ok {
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok {
				if c, ok := mm["content"].(string); ok {
					mm["content"] = strings.ReplaceAll(c, "{{input}}", input)
				}
			}
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.modelURL, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("idempotency-key", a.RunID)
	resp, err := w.http.Do(req)
	if err != nil {
		return fmt.Errorf("could not call the model: %w", err)
	}
	var answer struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Model string          `json:"model"`
		Usage json.RawMessage `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("model answered %d", resp.StatusCode)
	}
	if err != nil || len(answer.Choices) == 0 {
		return fmt.Errorf("could not decode the model's answer: %v", err)
	}
	output, err := json.Marshal(map[string]any{
		"text":                answer.Choices[0].Message.Content,
		"model":               answer.Model,
		"upstream_request_id": resp.Header.Get("x-request-id"),
		"usage":               answer.Usage,
	})
	if err != nil {
		return err
	}

	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "INSERT INTO bench_results (run_id, output) VALUES ($1, $2)"+
		" ON CONFLICT DO NOTHING", a.RunID, output); err != nil {
		return err
	}
	if len(a.Notify) > 0 {
		var batch pgx.Batch
		for _, ch := range a.Notify {
			payload, err := json.Marshal(map[string]any{"run_id": a.RunID, "job": a.Job,
				"tenant": a.Tenant, "channel": ch, "output": json.RawMessage(output)})
			if err != nil {
				return err
			}
			batch.Queue("INSERT INTO outbox (run_id, channel, payload) VALUES ($1, $2, $3)"+
				" ON CONFLICT DO NOTHING", a.RunID, ch, payload)
		}
		if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
			return err
		}
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func run() error {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	concurrency := envInt("PEER_CONCURRENCY", 100)

	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("could not parse DATABASE_URL: %w", err)
	}
	cfg.MaxConns = int32(envInt("PEER_POOL", 40))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("could not connect: %w", err)
	}
	defer pool.Close()

	if len(os.Args) == 2 && os.Args[1] == "--init" {
		migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
		if err != nil {
			return err
		}
		if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("could not migrate River's schema: %w", err)
		}
		_, err = pool.Exec(ctx, schema)
		return err
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &runWorker{
		pool: pool,
		http: &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{
			MaxIdleConns: concurrency, MaxIdleConnsPerHost: concurrency}},
		modelURL: strings.TrimRight(os.Getenv("MODEL_BASE_URL"), "/") + "/chat/completions",
	})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		FetchCooldown:     time.Duration(envInt("PEER_FETCH_COOLDOWN_MS", 2)) * time.Millisecond,
		FetchPollInterval: time.Duration(envInt("PEER_FETCH_POLL_MS", 20)) * time.Millisecond,
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: concurrency}},
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}

	kc, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), ",")...),
		kgo.ConsumerGroup(os.Getenv("PEER_GROUP_ID")),
		kgo.ConsumeTopics(os.Getenv("PEER_TOPIC")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)
	if err != nil {
		return err
	}

	sigctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for sigctx.Err() == nil {
		fetches := kc.PollFetches(sigctx)
		if sigctx.Err() != nil {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			logger.Warn("fetch failed", "topic", t, "partition", p, "err", err)
		})
		var params []river.InsertManyParams
		seen := make(map[string]bool)
		fetches.EachRecord(func(r *kgo.Record) {
			var ev event
			if err := json.Unmarshal(r.Value, &ev); err != nil {
				return // a real one would dead-letter it
			}
			// River refuses a whole batch that holds one unique key twice
			// (a redelivered event in the same poll): keep the first.
			id := runID(&ev)
			if seen[id] {
				return
			}
			seen[id] = true
			params = append(params, river.InsertManyParams{Args: runArgs{
				RunID: id, Job: ev.Job, Tenant: ev.Tenant,
				Input: ev.Input, Request: ev.Request, Notify: ev.Notify}})
		})
		if len(params) > 0 {
			if _, err := client.InsertMany(sigctx, params); err != nil {
				if errors.Is(err, context.Canceled) {
					break
				}
				return fmt.Errorf("could not insert jobs: %w", err)
			}
		}
		if err := kc.CommitUncommittedOffsets(sigctx); err != nil && sigctx.Err() == nil {
			logger.Warn("offset commit failed", "err", err)
		}
	}

	kc.Close()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "peer_river: %v\n", err)
		os.Exit(1)
	}
}
