package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackbone/stackbone/internal/cli"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// approver approves every pending decision of the dev tenant as it
// appears, from the HTTP API or the CLI, until stop is called; stop
// returns the decisions it approved and the errors it met. The decisions
// it makes while the clients' requests wait are what ends their waits.
func approver(env *stacktest.Env, viaCLI bool) (stop func() ([]store.Interrupt, []error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu       sync.Mutex
		approved []store.Interrupt
		errs     []error
		done     = make(chan struct{})
	)
	approve := func(it store.Interrupt) error {
		if viaCLI {
			var out, errb bytes.Buffer
			args := []string{"hitl", "approve", it.ID, "--yes", "--url", env.URL}
			if code := cli.Execute(ctx, cli.Options{}, args, strings.NewReader(""), &out, &errb); code != 0 {
				return fmt.Errorf("stackbone hitl approve %s: exit %d: %s", it.ID, code, errb.String())
			}
			return nil
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+"/v1/hitl/"+it.ID+"/approve", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("approve %s: %d", it.ID, resp.StatusCode)
		}
		return nil
	}
	go func() {
		defer close(done)
		sub := env.Runner.Bus.SubscribeTenant("dev")
		defer sub.Close()
		for {
			its, err := env.Store.ListInterrupts(ctx, "dev", store.InterruptFilter{Status: store.Pending})
			for _, it := range its {
				err := approve(it)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					approved = append(approved, it)
				}
				mu.Unlock()
			}
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-sub.C: // a thread changed: look again
			case <-sub.Dropped:
				sub.Drain()
			}
		}
	}()
	return func() ([]store.Interrupt, []error) {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return approved, errs
	}
}

// runWaitingClient runs tests/clients/approval-wait.mjs for one client
// against the default agents while approver decides from the API or the
// CLI, and checks that every case ended with the resumed turn's answer,
// each after exactly one approval and one run of the refund tool.
func runWaitingClient(t *testing.T, which string, cases int, viaCLI bool) {
	t.Helper()
	node, dir := nodeFixture(t, "clients", filepath.Join("@openai", "agents", "package.json"), filepath.Join("ai", "package.json"))
	env := stacktest.New(t, stacktest.Options{})
	stop := approver(env, viaCLI)
	var out struct {
		Results []struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
			Text  string `json:"text"`
		} `json:"results"`
	}
	runErr := runNodeScript(t, node, dir, "approval-wait.mjs", &out, env.URL, "assistant", which)
	approved, errs := stop()
	for _, err := range errs {
		t.Error(err)
	}
	if len(out.Results) != cases {
		t.Fatalf("want %d cases, got %+v", cases, out.Results)
	}
	for _, r := range out.Results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		} else {
			t.Logf("%s: %q", r.Name, r.Text)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatal(runErr)
	}
	if len(approved) != cases || env.Calls.Get("refund") != cases {
		t.Fatalf("%d approvals, refund ran %d times; want %d of each", len(approved), env.Calls.Get("refund"), cases)
	}
}

// TestApprovalWaitVercelAISDK: the AI SDK's generateText with tools and
// stopWhen (and streamText) through openai.chat(), sending
// x-stackbone-approval: wait in headers, completes a turn that needs an
// approval made from the CLI while the request waits: one step whose text
// is the resumed turn's answer (it died on the 409 before).
func TestApprovalWaitVercelAISDK(t *testing.T) {
	t.Parallel()
	runWaitingClient(t, "aisdk", 2, true)
}

// TestApprovalWaitOpenAINodeChat: the openai Node SDK on Chat Completions
// (create and stream) with the header ends with the resumed turn's answer,
// approved from the API meanwhile.
func TestApprovalWaitOpenAINodeChat(t *testing.T) {
	t.Parallel()
	runWaitingClient(t, "chat", 2, false)
}

// TestApprovalWaitOpenAINodeResponses: the openai Node SDK on Responses
// (create and stream) with the header ends with a completed response that
// holds the resumed turn's answer and no function_call, approved from the
// API meanwhile.
func TestApprovalWaitOpenAINodeResponses(t *testing.T) {
	t.Parallel()
	runWaitingClient(t, "responses", 2, false)
}

// TestApprovalWaitAgentsSDK: the OpenAI Agents SDK's run() (and its
// stream), whose OpenAI client sends the header, ends with the resumed
// turn's final output, approved from the CLI meanwhile (it failed with
// ModelBehaviorError: Tool refund not found before).
func TestApprovalWaitAgentsSDK(t *testing.T) {
	t.Parallel()
	runWaitingClient(t, "agents", 2, true)
}

// TestApprovalWaitLangChain: LangChain's createAgent over ChatOpenAI (its
// default Chat Completions mode), whose client sends the header, ends its
// invoke and its stream with the resumed turn's answer, approved from the
// CLI meanwhile (it died on the 409 before).
func TestApprovalWaitLangChain(t *testing.T) {
	t.Parallel()
	runWaitingClient(t, "langchain", 2, true)
}
