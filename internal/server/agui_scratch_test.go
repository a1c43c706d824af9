package server_test

import (
	"fmt"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
)

func TestAGUIScratch(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{})
	s, it := aguiInterrupt(t, env, "th-refund", "refund my order")
	fmt.Println(s.body)
	body := fmt.Sprintf(`{"threadId":"th-refund","runId":"run-2","messages":[],"resume":[{"interruptId":%q,"status":"resolved","payload":{"approved":true}}]}`, it["id"])
	fmt.Println(aguiPost(t, env, "assistant", body).body)
	fmt.Println(aguiPost(t, env, "assistant", aguiInput("th-refund", "run-3", "draft it")).body)
}
