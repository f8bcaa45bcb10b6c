package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	axocoatl "github.com/axocoatl/axocoatl-go"
	"github.com/axocoatl/axocoatl-go/a2a"
	"github.com/axocoatl/axocoatl-go/a2aremote"
	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/agent/provider"
	"github.com/axocoatl/axocoatl-go/agent/provider/anthropic"
	"github.com/axocoatl/axocoatl-go/agent/provider/openai"
	"github.com/axocoatl/axocoatl-go/approval"
	"github.com/axocoatl/axocoatl-go/cluster"
	"github.com/axocoatl/axocoatl-go/config"
	"github.com/axocoatl/axocoatl-go/conversation"
	"github.com/axocoatl/axocoatl-go/egress"
	"github.com/axocoatl/axocoatl-go/httpapi"
	"github.com/axocoatl/axocoatl-go/internal/clustersig"
	"github.com/axocoatl/axocoatl-go/internal/httpguard"
	"github.com/axocoatl/axocoatl-go/lattice"
	"github.com/axocoatl/axocoatl-go/mcpclient"
	"github.com/axocoatl/axocoatl-go/mcpserver"
)

// boundRow is one row of docs/bounds.md.
type boundRow struct {
	area, what, def, key string
	line                 int
}

// id names a row in boundGuards: its key, or for a row without one its
// area and what.
func (r boundRow) id() string {
	if r.key != "" {
		return r.key
	}
	return r.area + " / " + r.what
}

// guard is what holds a row of docs/bounds.md to its word.
type guard struct {
	// def is the default in code (an exported constant), compared with
	// the first value of the row's default column; nil where the bound is
	// an unexported constant (its guard test then pins the number itself).
	def any
	// tests are the tests that fail when the bound is removed or raised,
	// as "dir:TestName" with dir relative to the repository root; each
	// says "Guards" in its comment.
	tests []string
}

// boundGuards is the audit of docs/bounds.md: every row, the default the
// code has, and the tests that guard it (issue 24: "Every bound the README
// lists has a test that fails when the bound is removed").
var boundGuards = map[string]guard{
	// Streaming (issue 26): a run's live events.
	"A run's live events / listeners of one run (`FollowRun`, a door's `OnEvent`; in Go `axocoatl.Options.MaxRunListeners`)": {axocoatl.DefaultMaxRunListeners, []string{".:TestFollowRun"}},
	"A run's live events / events queued for one listener":                                                                   {axocoatl.RunListenerBuffer, []string{".:TestFollowRun", ".:TestSlowOnEventDoesNotSlowTheModel"}},
	"A run's live events / merged text pending for one listener":                                                             {axocoatl.RunListenerTextBytes, []string{".:TestSlowOnEventDoesNotSlowTheModel"}},
	"A run's live events / an SSE execute's client that stops reading":                                                       {nil, []string{"httpapi:TestExecuteSSEStuckClientCut"}},
	"agents[].max_tokens_per_run":                                                                                            {nil, []string{"agent:TestMaxTokensPerRun", "httpapi:TestExecuteMaxTokensPerRun"}},
	// Conversations (issue 25): every store runs storetest.
	"conversations.max_conversations":                   {conversation.DefaultMaxConversations, []string{"conversation:TestMemoryStore", "conversation/boltstore:TestStore", "conversation/boltstore:TestHundredThousandConversations", "conversation/natskv:TestStore"}},
	"conversations.max_per_agent":                       {conversation.DefaultMaxPerAgent, []string{"conversation:TestMemoryStore", "conversation/boltstore:TestStore", "conversation/natskv:TestStore"}},
	"conversations.max_messages":                        {conversation.DefaultMaxMessages, []string{"conversation:TestMemoryStore", "conversation/boltstore:TestStore", "conversation/natskv:TestStore", ".:TestTurnsTooBigForTheRecord"}},
	"conversations.max_bytes":                           {conversation.DefaultMaxBytes, []string{"conversation:TestMemoryStore", "conversation/boltstore:TestStore", "conversation/natskv:TestStore", ".:TestTurnsTooBigForTheRecord"}},
	"conversations.max_total_bytes":                     {conversation.DefaultMaxTotalBytes, []string{"conversation:TestMemoryStore", "conversation/boltstore:TestStore", "conversation/natskv:TestStore"}},
	"conversations.idle_ttl":                            {conversation.DefaultIdleTTL, []string{"conversation:TestMemoryStore", "conversation/boltstore:TestStore", "conversation/natskv:TestStore"}},
	"agents[].max_history_bytes":                        {agent.DefaultMaxHistoryBytes, []string{"conversation:TestWindowKeepsPairsAndFits", ".:TestLongConversationIsWindowed", ".:TestLongConversationTailIsTheWindow"}},
	"Conversations / turns of one conversation at once": {nil, []string{".:TestConcurrentTurnsAreRefusedNotInterleaved", "httpapi:TestConversationConcurrentTurns"}},
	"Conversations / a page of conversations":           {conversation.MaxPage, []string{"conversation:TestMemoryStore", "httpapi:TestConversationRoutes"}},
	// Streamed provider answers (issue 26).
	"Providers / one streamed answer: its whole time, its bytes (`providers.<kind>.timeout`)": {nil, []string{"agent/provider/internal/wire:TestStreamTimeout", "agent/provider/builtin:TestHostileStreams"}},
	"Providers / one event of a stream":                          {nil, []string{"agent/provider/internal/wire:TestSSEBounds"}},
	"Providers / events of one streamed answer; deltas it emits": {nil, []string{"agent/provider/internal/wire:TestSSEBounds", "agent/provider/internal/wire:TestAssemblerDeltaBound"}},
	"Providers / tool calls started in one streamed answer":      {nil, []string{"agent/provider/internal/wire:TestAssemblerBounds"}},
	"Providers / arguments of one streamed tool call":            {nil, []string{"agent/provider/internal/wire:TestAssemblerBounds"}},
	// MCP progress carrying the text so far (issue 26).
	"MCP server / the answer's text in one progress notification (a call with a `progressToken`)": {mcpserver.ProgressTextBytes, []string{"mcpserver:TestProgressTextIsBounded", "mcpserver:TestAnswerTailBound"}},
	"MCP server / text progress notifications of one call":                                        {nil, []string{"mcpserver:TestProgressTextIsBounded", "mcpserver:TestProgressCarriesTheTextSoFar"}},
	// A2A streaming (issue 26).
	"A2A server / stream updates queued for one streaming client": {nil, []string{"a2a:TestLiveBoundedForStuckClient", "a2a:TestStreamStuckClientRunCompletes"}},
	// A2A conversations (issue 25).
	"A2A server / turns of one `contextId` at once":      {nil, []string{"a2a:TestConversationBusy"}},
	"A2A server / a client's `contextId`":                {conversation.MaxIDLength, []string{"a2a:TestConversationBadInput"}},
	"A2A server / the conversation look-up of a message": {nil, []string{"a2a:TestConversationLookupBounded"}},
	// Every door (HTTP)
	"server.max_concurrent_runs":                     {axocoatl.DefaultMaxRuns, []string{".:TestMaxRunsRefusesBeyond", "examples/daemon:TestMaxConcurrentRunsAtEveryDoor"}},
	"server.max_auth_failures":                       {httpguard.DefaultFailureLimit.Max, []string{"internal/httpguard:TestWrongTokensSlowed", "internal/httpguard:TestWrongTokensWindowEnds", "examples/daemon:TestMaxAuthFailuresKey"}},
	"server.auth.oauth.jwks_min_refresh":             {httpguard.DefaultJWKSMinRefresh, []string{"internal/httpguard:TestUnknownKidsFetchOncePerMinRefresh"}},
	"server.auth.oauth.jwks_timeout":                 {httpguard.DefaultJWKSTimeout, []string{"internal/httpguard:TestJWKSTimeout"}},
	"server.auth.oauth.max_jwks_bytes":               {int64(httpguard.DefaultMaxJWKSBytes), []string{"internal/httpguard:TestJWKSBodyBound"}},
	"Every door / an access token (JWT)":             {int64(httpguard.MaxJWTBytes), []string{"internal/httpguard:TestJWTSizeBound"}},
	"Every door / verified access tokens remembered": {httpguard.MaxVerifiedTokens, []string{"internal/httpguard:TestVerifiedTokensBounded"}},
	// Trace context (issue 28): W3C's suggested limit of a tracestate.
	"Every door / a caller's traceparent or tracestate value (HTTP header, MCP `_meta`, NATS header, a queued webhook delivery)": {lattice.MaxTraceHeaderBytes,
		[]string{".:TestPropagatorBounded", "mcpserver:TestTraceContextIn", "cluster:TestTracingOffAllocatesNothing"}},
	"Every door / store pages one conversation listing reads for a token with agent globs": {nil, []string{"config:TestFilteredConversationPagesBounded"}},
	"server.request_timeout":                         {config.DefaultRequestTimeout, []string{"examples/daemon:TestExecuteUpstreamStatuses"}},
	"server.body_timeout":                            {config.DefaultBodyTimeout, []string{"examples/daemon:TestSlowBodyTimesOut", "mcpserver:TestHTTPSlowBodyTimesOut", "a2a:TestSlowBodyTimesOut"}},
	"server.write_timeout":                           {httpguard.DefaultWriteTimeout, []string{"internal/httpguard:TestWriteDeadline", "examples/daemon:TestNonReadersFreedWithinTwoWriteTimeouts"}},
	"Every door / a request body":                    {int64(httpguard.DefaultMaxBodyBytes), []string{"internal/httpguard:TestBodyLimit"}},
	"server.shutdown_grace":                          {config.DefaultShutdownGrace, []string{"examples/daemon:TestShutdownGraceBounded"}},
	"Event stream / events buffered per client":      {nil, []string{"httpapi:TestEventStreamBufferBound", "examples/daemon:TestEventStreamLagged"}},
	"Event stream / a connection that stays blocked": {httpguard.DefaultWriteTimeout, []string{"examples/daemon:TestNonReadersFreedWithinTwoWriteTimeouts"}},
	"Event stream / one frame a client sends":        {nil, []string{"httpapi:TestEventStreamClientFrameBound"}},
	"Event stream / streams open at once":            {nil, []string{"httpapi:TestEventStreamMaxStreams"}},
	"Event stream / history in the ready frame":      {httpapi.DefaultHistoryEvents, []string{"httpapi:TestReadyFrameHistoryBounded", "lattice:TestHistoryKeepsTheLatestInOrder"}},
	"Event stream / runs one socket follows or has started at once (`follow`, `execute`)": {nil, []string{"httpapi:TestWebSocketMaxLiveRuns"}},
	"Event stream / text pending per run of a socket":                                     {nil, []string{"httpapi:TestLivePendingBounds", "httpapi:TestWebSocketSlowReaderCoalesced", "httpapi:TestWebSocketStuckClientsBounded"}},
	"Event stream / text of one delta frame":                                              {nil, []string{"httpapi:TestWebSocketDeltaFrameBound"}},
	// Run timelines (issue 28): a run's waterfall.
	"Run timelines / timelines kept (in Go `httpapi.Config.TimelineRuns`)":                              {httpapi.DefaultTimelineRuns, []string{"httpapi:TestTimelineBounds", "httpapi:TestTimelineOfARun"}},
	"Run timelines / rows of one run's timeline, from its events (in Go `httpapi.Config.TimelineRows`)": {httpapi.DefaultTimelineRows, []string{"httpapi:TestTimelineBounds", "httpapi:TestTimelineOfARun"}},

	"Config file / the config file `--config` or `AXOCOATL_CONFIG` names": {config.MaxFileBytes, []string{"config:TestConfigFileBound"}},

	// Telemetry (issue 28).
	"telemetry.timeout": {config.DefaultTelemetryTimeout, []string{"internal/otlpexport:TestRequestTimeout"}},
	"Telemetry / the retries of one failed export (429, 502, 503, 504, a transport error)": {config.TelemetryRetryElapsed, []string{"internal/otlpexport:TestRetriesAndHeaders"}},
	"Telemetry / spans waiting for export":                                                 {config.TelemetryQueueSpans, nil},
	"Telemetry / spans in one export request":                                              {config.TelemetryBatchSpans, nil},
	"Telemetry / how long an ended span waits for its batch to fill":                       {config.TelemetryBatchDelay, []string{"config:TestTelemetryIgnoresSDKVariables"}},
	"Telemetry / the flush of queued spans when the daemon stops":                          {config.TelemetryShutdownTimeout, []string{"config:TestTelemetryCloseBounded"}},
	"telemetry.headers": {config.MaxTelemetryHeaders, []string{"config:TestTelemetryHeadersBound"}},
	"Telemetry / one content attribute (`telemetry.capture_content`: messages, tool arguments, results)": {axocoatl.MaxSpanContentBytes, []string{".:TestRunSpansCaptureContent"}},
	"Telemetry / a name a peer chose (a response's model, a finish reason)":                              {256, []string{".:TestSpanPeerNamesBounded"}},
	"Telemetry / a collector's answer read":                                                              {64 << 10, nil},
	"Telemetry / the encoding buffer the exporter keeps between batches":                                 {4 << 20, []string{"internal/otlpexport:TestKeptBufferBounded"}},

	// Agent runs
	"agents[].max_iterations":                            {agent.DefaultMaxIterations, []string{".:TestMaxIterations"}},
	"agents[].timeout":                                   {agent.DefaultTimeout, []string{".:TestTimeoutAndCloseCancelRuns"}},
	"agents[].max_tool_calls_per_turn":                   {agent.DefaultMaxToolCallsPerTurn, []string{"agent:TestToolCallsPerTurnBounded", "agent:TestToolCallsFloodFailsRun"}},
	"agents[].max_parallel_tool_calls":                   {agent.DefaultMaxParallelToolCalls, []string{"agent:TestToolCallsPerTurnBounded"}},
	"Agent runs / tool definitions in one model request": {openai.MaxTools, []string{"agent:TestToolDefinitionLimit", "agent/provider/builtin:TestOpenAIToolDefinitionLimit"}},

	// Providers
	"providers.<kind>.timeout":     {provider.DefaultTimeout, []string{"agent/provider/builtin:TestProviderFailures"}},
	"providers.<kind>.max_retries": {provider.DefaultMaxRetries, []string{"agent/provider/builtin:TestProviderRetriesBounded"}},
	"Providers / one answer":       {nil, []string{"agent/provider/builtin:TestHugeResponseBody"}},
	"providers.<kind>.max_tokens":  {anthropic.DefaultMaxTokens, []string{"agent/provider/builtin:TestAnthropicToolUseRoundTrip"}},

	// MCP server
	"mcp_server.max_sessions":               {mcpserver.DefaultMaxSessions, []string{"mcpserver:TestHTTPMaxSessions", "mcpserver:TestHTTPMaxSessionsConcurrentListens"}},
	"mcp_server.session_timeout":            {mcpserver.DefaultSessionTimeout, []string{"mcpserver:TestHTTPIdleSessionClosed"}},
	"mcp_server.input_timeout":              {mcpserver.DefaultInputTimeout, []string{"approval:TestInputRequiredStateExpires"}},
	"mcp_server.max_input_calls":            {mcpserver.DefaultMaxInputCalls, []string{"approval:TestInputRequiredMaxInputCalls"}},
	"MCP server / a retry's `requestState`": {nil, []string{"approval:TestInputRequiredStateRefused"}},
	"mcp_server.max_message_bytes":          {int64(mcpserver.DefaultMaxMessageBytes), []string{"mcpserver:TestHTTPBodyLimit"}},
	"mcp_server.max_message_values":         {mcpserver.DefaultMaxMessageValues, []string{"mcpserver:TestMessageValuesAndDepthBounds", "mcpserver:TestHTTPWideMetaCostsItsBytes"}},
	"mcp_server.max_message_depth":          {mcpserver.DefaultMaxMessageDepth, []string{"mcpserver:TestMessageValuesAndDepthBounds"}},
	"mcp_server.max_bytes_in_flight":        {int64(mcpserver.DefaultMaxBytesInFlight), []string{"mcpserver:TestHTTPBytesInFlightBound", "mcpserver:TestHTTPListenBodiesWithinBytesInFlight"}},
	"mcp_server.resume_buffer_bytes":        {int64(mcpserver.DefaultResumeBufferBytes), []string{"mcpserver:TestResumeStoreBound", "mcpserver:TestHTTPResumeBufferBound"}},

	"MCP server / `subscriptions/listen` requests open at once on one stdio session":                                     {mcpserver.MaxStdioListens, []string{"mcpserver:TestStdioListensBounded"}},
	"MCP server / answers to one question that do not match its schema, from a 2025-11-25 client (`elicitation/create`)": {nil, []string{"mcpserver:TestElicitationAnswerChecked"}},

	// MCP client, per server
	"mcp_servers[].max_tools":                                     {mcpclient.DefaultMaxTools, []string{"mcpclient:TestHundredThousandTools"}},
	"mcp_servers[].max_list_pages":                                {mcpclient.DefaultMaxListPages, []string{"mcpclient:TestEndlessPages"}},
	"mcp_servers[].max_list_bytes":                                {int64(mcpclient.DefaultMaxListBytes), []string{"mcpclient:TestListBytesBound", "mcpclient:TestRefusedListingIsFreed"}},
	"MCP client / one message (stdio line, HTTP body, SSE event)": {nil, []string{"mcpclient:TestFrameLimitIsPerEvent", "mcpclient:TestHTTPEndlessAnswerIsCut"}},
	"mcp_servers[].timeout":                                       {mcpclient.DefaultTimeout, []string{"mcpclient:TestInProcess", "mcpclient:TestCallDeadlines"}},
	"mcp_servers[].keep_alive":                                    {mcpclient.DefaultKeepAlive, []string{"mcpclient:TestKeepAliveReplacesHungServer", "mcpclient:TestKeepAliveReplacesHung2026Server"}},
	"MCP client / `list_changed` re-lists":                        {nil, []string{"mcpclient:TestListChangedFlood"}},
	"MCP client / a child's stderr":                               {nil, []string{"mcpclient:TestStderrFlood", "mcpclient:TestStderrCutKeepsSecrets"}},
	"MCP client / OAuth logins waiting for their callback":        {mcpclient.DefaultLoginTimeout, []string{"mcpclient:TestOAuthLoginOverHTTP"}},
	"MCP client / entries of `oauth.allow_hosts` (hosts inside that a public server's OAuth requests may reach)": {mcpclient.MaxOAuthAllowHosts, []string{"mcpclient:TestOAuthConfigValidate"}},
	"MCP client / a token endpoint's answer (private_key_jwt)":                                                   {int64(mcpclient.MaxTokenAnswerBytes), []string{"mcpclient:TestOAuthTokenAnswerBound"}},

	// A2A server
	"a2a.max_tasks":            {a2a.DefaultMaxTasks, []string{"a2a:TestStoreCountBound"}},
	"a2a.task_ttl":             {a2a.DefaultTaskTTL, []string{"a2a:TestStoreTTL", "a2a:TestStoreTTLSweepsUnreadTasks"}},
	"a2a.max_store_bytes":      {int64(a2a.DefaultMaxStoreBytes), []string{"a2a:TestStoreByteBound"}},
	"a2a.max_body_bytes":       {int64(a2a.DefaultMaxBodyBytes), []string{"a2a:TestJSONRPCBodyLimit"}},
	"a2a.max_background_tasks": {a2a.DefaultMaxBackgroundTasks, []string{"a2a:TestMaxBackgroundTasks"}},
	// A2A push notifications (issue 26).
	"a2a.max_push_configs_per_task":             {a2a.DefaultMaxPushConfigsPerTask, []string{"a2a:TestPushConfigBounds"}},
	"a2a.max_push_configs":                      {a2a.DefaultMaxPushConfigs, []string{"a2a:TestPushConfigBounds"}},
	"A2A server / one push notification config": {nil, []string{"a2a:TestPushRefusesPrivateTargets"}},
	"push.queue_size":                           {egress.DefaultQueueSize, []string{"egress:TestPushQueueBound"}},
	"A2A server / `ListTasks` page":             {nil, []string{"a2a:TestListTasksPageBound", "a2a:TestV1WireErrors"}},

	// A2A client, per remote agent
	"a2a_agents[].max_response_bytes": {int64(a2aremote.DefaultMaxResponseBytes), []string{"a2aremote:TestBounds"}},
	"A2A client / the card":           {int64(a2aremote.DefaultMaxCardBytes), []string{"a2aremote:TestCheck"}},
	"a2a_agents[].max_output_bytes":   {a2aremote.DefaultMaxOutputBytes, []string{"a2aremote:TestBounds"}},
	"a2a_agents[].max_concurrent":     {a2aremote.DefaultMaxConcurrent, []string{"a2aremote:TestBounds"}},
	"a2a_agents[].timeout":            {a2aremote.DefaultTimeout, []string{"a2aremote:TestTimeoutCancelsRemoteTask"}},

	// Approval
	"approval.timeout": {approval.DefaultTimeout, []string{"approval:TestPromptAllowDenyExpire"}},
	"Approval / arguments in `ApprovalRequested`":                                                  {int64(approval.MaxArgumentsPreview), []string{"approval:TestArgumentsPreview"}},
	"Approval / pending approvals per `ApprovalPending` event":                                     {nil, []string{"approval:TestPendingSyncRepliesBounded"}},
	"Approval / a write of `approvals.json` waiting for another process's (`approvals.json.lock`)": {nil, []string{"approval:TestRememberWaitsForTheLockAtMost10s"}},

	"Approval / approvals pending on other Engines tracked (from the lattice)": {nil, []string{"approval:TestRemoteApprovalsTrackedBounded"}},
	"Approval / pending questions per server (an MCP server's elicitation)":    {int64(approval.MaxQuestionsPerServer), []string{"approval:TestQuestionBounds", "approval:TestQuestionAttributionAndFlood"}},
	"Approval / a question's requested schema":                                 {int64(approval.MaxQuestionSchemaBytes), []string{"approval:TestQuestionBounds"}},
	"Approval / a question's answer (`content`)":                               {int64(approval.MaxAnswerBytes), []string{"approval:TestQuestionBounds"}},
	"Approval / a question's message":                                          {int64(approval.MaxQuestionMessage), []string{"approval:TestQuestionMessageCut"}},
	"Approval / a question put again to a door after an answer that does not match its schema (a door that does not check with `UserPrompt.Check`)": {nil, []string{"approval:TestQuestionThroughDoor", "approval:TestQuestionDoorRetriesBounded"}},

	// Webhooks, per webhook
	"webhooks[].queue_size":       {egress.DefaultQueueSize, []string{"egress:TestFloodBoundedAndCounted"}},
	"webhooks[].concurrency":      {egress.DefaultConcurrency, []string{"egress:TestFloodBoundedAndCounted"}},
	"webhooks[].timeout":          {egress.DefaultTimeout, []string{"egress:TestHangingReceiverTimesOut"}},
	"webhooks[].max_attempts":     {egress.DefaultMaxAttempts, []string{"egress:TestDeadLetterRetriedThroughAPI"}},
	"webhooks[].max_dead_letters": {egress.DefaultMaxDeadLetters, []string{"egress:TestDeadLettersBounded"}},
	"webhooks[].backoff_max":      {egress.DefaultBackoffMax, []string{"egress:TestRetryAfterHonouredAndCapped"}},
	"Webhooks / events buffered between the lattice and the queues": {egress.SubscribeBuffer, []string{"egress:TestLatticeBufferBound", "egress:TestLatticeLossesCounted"}},
	"Webhooks / one delivery on NATS":                               {int64(egress.DefaultMaxMsgSize), []string{"egress:TestJetStreamDeliveryOverMaxMsgSizeDropped"}},

	// Lattice and cluster
	"Lattice and cluster / events buffered per subscriber":              {lattice.DefaultBuffer, []string{"lattice:TestSlowSubscriberMissesWithoutBlockingOthers"}},
	"lattice.reconnect_buffer_bytes":                                    {int64(config.DefaultReconnectBuffer), []string{"lattice/nats:TestOutageIsCountedAsMissed", "config:TestReconnectBufferBytesReachesTheClient"}},
	"cluster.max_concurrent_runs":                                       {cluster.DefaultMaxConcurrentRuns, []string{"cluster:TestConcurrentRunsBound", "cluster:TestTaskFlood"}},
	"cluster.accept_timeout":                                            {cluster.DefaultAcceptTimeout, []string{"cluster:TestAcceptTimeout"}},
	"cluster.max_announce_bytes":                                        {int64(cluster.DefaultMaxAnnounceBytes), []string{"cluster:TestAnnouncementWithinMaxAnnounceBytes"}},
	"cluster.max_nodes":                                                 {cluster.DefaultMaxNodes, []string{"cluster:TestUntrackedExecutorDiesCallerFails"}},
	"Lattice and cluster / a task and its answer":                       {nil, []string{"cluster:TestTaskAndAnswerWithinMaxPayload"}},
	"Lattice and cluster / cancels of not-yet-seen tasks remembered":    {nil, []string{"cluster:TestCancelsOfUnseenTasksBounded"}},
	"Lattice and cluster / tasks waiting for a worker":                  {nil, []string{"cluster:TestTaskQueueBounded"}},
	"Lattice and cluster / other cluster subscriptions":                 {nil, []string{"cluster:TestClusterSubscriptionsPendingLimits"}},
	"Lattice and cluster / one event frame of a remote run":             {nil, []string{"cluster:TestEventFrameBytesBounded"}},
	"Lattice and cluster / event frames of a remote run":                {nil, []string{"cluster:TestEventFramesCoalesced"}},
	"Lattice and cluster / a caller of a remote run that stops reading": {nil, []string{"cluster:TestStuckCallerDoesNotBlockRemoteRun"}},
	// Signed cluster messages (issue 30).
	"Lattice and cluster / a signed message's age (with `cluster.key`)":     {nil, []string{"internal/clustersig:TestWindow", "cluster:TestVerdictReplayRefused"}},
	"Lattice and cluster / replays remembered, per sender and subscription": {int64(clustersig.ReplayWindow), []string{"internal/clustersig:TestGuardWindow"}},
	"Lattice and cluster / senders followed per subscription":               {int64(clustersig.MaxSenders), []string{"internal/clustersig:TestGuardWindow"}},
	"Lattice and cluster / log lines of refused cluster messages":           {nil, []string{"internal/clustersig:TestRefusalLogRateLimited"}},
	"cluster.accepted_keys": {clustersig.MaxAcceptedKeys, []string{"internal/clustersig:TestValidateKeys"}},
}

// readBounds parses the tables of docs/bounds.md. The area of a row is its
// section's heading up to " (" or ", ", its key the backquoted key column ("" for
// "—" or a table without one).
func readBounds(t *testing.T) []boundRow {
	t.Helper()
	data, err := os.ReadFile("../docs/bounds.md")
	if err != nil {
		t.Fatal(err)
	}
	var (
		rows   []boundRow
		area   string
		header []string
	)
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			area, _, _ = strings.Cut(strings.TrimPrefix(line, "## "), " (")
			area, _, _ = strings.Cut(area, ", ")
			header = nil
		case strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			switch {
			case header == nil:
				header = cells
			case strings.HasPrefix(cells[0], "---"):
			default:
				r := boundRow{area: area, line: i + 1}
				for j, h := range header {
					if j >= len(cells) {
						break
					}
					switch h {
					case "what":
						r.what = cells[j]
					case "default":
						r.def = cells[j]
					case "key":
						if k := cells[j]; k != "—" {
							r.key = strings.Trim(k, "`")
						}
					}
				}
				rows = append(rows, r)
			}
		default:
			header = nil
		}
	}
	return rows
}

// Every row of docs/bounds.md names a key that exists, states the default
// the code has, and is guarded by tests that exist and say so (the audit
// of issue 24). A row added without a guard, a key renamed in the code but
// not in the table, or a default changed on one side only fails here.
// Rows without a guard yet are listed in boundGuards with no tests and
// logged, so the gap is visible rather than forgotten.
func TestBoundsTableIsGuarded(t *testing.T) {
	rows := readBounds(t)
	if len(rows) < 60 {
		t.Fatalf("read %d rows from docs/bounds.md: the table's format changed?", len(rows))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		id := r.id()
		if seen[id] {
			t.Errorf("docs/bounds.md:%d: row %q twice", r.line, id)
		}
		seen[id] = true
		if r.key != "" {
			if err := resolveKey(reflect.TypeOf(config.Config{}), r.key); err != nil {
				t.Errorf("docs/bounds.md:%d: key %s: %v", r.line, r.key, err)
			}
		}
		g, ok := boundGuards[id]
		if !ok {
			t.Errorf("docs/bounds.md:%d: row %q has no entry in boundGuards: which test fails when this bound is removed?", r.line, id)
			continue
		}
		if g.def != nil {
			if err := sameDefault(r.def, g.def); err != nil {
				t.Errorf("docs/bounds.md:%d: %s: default %q: %v", r.line, id, r.def, err)
			}
		}
		if len(g.tests) == 0 {
			t.Logf("docs/bounds.md:%d: %s: no guarding test yet", r.line, id)
		}
		for _, name := range g.tests {
			if err := checkGuardTest(name); err != nil {
				t.Errorf("docs/bounds.md:%d: %s: %v", r.line, id, err)
			}
		}
	}
	for id := range boundGuards {
		if !seen[id] {
			t.Errorf("boundGuards has %q, which docs/bounds.md no longer lists", id)
		}
	}
}

// resolveKey finds a dotted config key (agents[].timeout,
// providers.<kind>.max_retries) among the yaml tags of t.
func resolveKey(t reflect.Type, key string) error {
	for _, part := range strings.Split(key, ".") {
		if part == "<kind>" {
			if t.Kind() != reflect.Map {
				return fmt.Errorf("%q: %s is not a map", part, t)
			}
			t = t.Elem()
			continue
		}
		name, list := strings.CutSuffix(part, "[]")
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		f, ok := yamlField(t, name)
		if !ok {
			return fmt.Errorf("no field with yaml tag %q in %s", name, t)
		}
		t = f.Type
		if list {
			if t.Kind() != reflect.Slice {
				return fmt.Errorf("%q: %s is not a list", part, t)
			}
			t = t.Elem()
		}
	}
	return nil
}

// yamlField is the field of struct t whose yaml name is name, looking into
// inlined structs.
func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if g, ok := yamlField(f.Type, name); ok {
				return g, true
			}
			continue
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// firstValue is the first number of a default cell, with its unit.
var firstValue = regexp.MustCompile(`([0-9][0-9,]*)\s?(GiB|MiB|KiB|ms|s|m|h)?\b`)

// sameDefault compares the first value of a default cell ("`1000`",
// "4 MiB", "`30m`", "65,536", "`server.write_timeout` (30 s)") with the
// code's default.
func sameDefault(cell string, def any) error {
	m := firstValue.FindStringSubmatch(cell)
	if m == nil {
		return fmt.Errorf("no value in it")
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	if err != nil {
		return err
	}
	if d, ok := def.(time.Duration); ok {
		unit := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
		if unit == 0 {
			return fmt.Errorf("the code's default is a duration, %v", d)
		}
		if got := time.Duration(n) * unit; got != d {
			return fmt.Errorf("the docs say %v, the code %v", got, d)
		}
		return nil
	}
	want := reflect.ValueOf(def).Int()
	switch m[2] {
	case "GiB":
		n <<= 30
	case "MiB":
		n <<= 20
	case "KiB":
		n <<= 10
	case "":
	default:
		return fmt.Errorf("the docs give a duration, the code %d", want)
	}
	if n != want {
		return fmt.Errorf("the docs say %d, the code %d", n, want)
	}
	return nil
}

// checkGuardTest finds "dir:TestName" in the repository and checks that
// the comment above it says which bound it guards.
func checkGuardTest(name string) error {
	dir, fn, ok := strings.Cut(name, ":")
	if !ok {
		return fmt.Errorf("guard %q is not dir:TestName", name)
	}
	files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		src := string(data)
		i := strings.Index(src, "\nfunc "+fn+"(")
		if i < 0 {
			continue
		}
		// The comment block right above the function.
		lines := strings.Split(src[:i], "\n")
		var comment []string
		for j := len(lines) - 1; j >= 0 && strings.HasPrefix(lines[j], "//"); j-- {
			comment = append(comment, lines[j])
		}
		if !strings.Contains(strings.Join(comment, " "), "Guards") {
			return fmt.Errorf("%s (%s) does not say in its comment which bound it guards (\"Guards: ...\")", fn, f)
		}
		return nil
	}
	return fmt.Errorf("no test %s in %s", fn, dir)
}

// Every document that tables a key with its default (docs/configuration.md,
// docs/a2a.md, docs/webhooks.md, …) states the default the bounds table
// and the code have: each single-key row whose key is a bound with a
// default in code is checked against it.
func TestDocsDefaultsMatchBounds(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range append(files, "../README.md") {
		if filepath.Base(file) == "bounds.md" {
			continue // TestBoundsTableIsGuarded
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
				continue
			}
			key := strings.TrimSpace(cells[0])
			if strings.Count(key, "`") != 2 || strings.Contains(key, ",") {
				continue // several keys in one row, or not a key
			}
			g, ok := boundGuards[strings.Trim(key, "`")]
			if !ok || g.def == nil {
				continue
			}
			checked++
			if err := sameDefault(strings.TrimSpace(cells[1]), g.def); err != nil {
				t.Errorf("%s:%d: %s: default %q: %v", strings.TrimPrefix(file, "../"), i+1, key, strings.TrimSpace(cells[1]), err)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d rows of the docs: their key tables' format changed?", checked)
	}
	t.Logf("%d defaults stated in the docs match the code", checked)
}
