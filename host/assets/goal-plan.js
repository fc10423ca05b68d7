// The Goal Plan card's View: a goal's plan, steps, revision and last checkpoint, observed while
// it is shown.
//
// Inlined by host/src/mcp/app_card.rs after the MCP Apps SDK (`ExtApps`, in scope). The chat
// host renders it for `present_goal_plan`; its tool result names the goal. Each observation
// (`goal_plan_observe`) is a read — never meaningful work — and the evidence the server uses,
// on its own clock, to notice that the goal's workflow stalled (it then wakes the goal's
// controller once). This card never dispatches a turn itself.
// A module: strict already.

const OBSERVE_MS = 30000; // visible; well inside the server's longest observation gap
const HIDDEN_OBSERVE_MS = 60000;
const GOAL = /^goal_[0-9a-f]{24}$/;

const app = new ExtApps.App({ name: "ahp-goal-plan", version: "1" }, {}, { autoResize: true });
let goalId = null;
let timer = null;

const $ = (id) => document.getElementById(id);

function render(o) {
  const g = o.goal || {};
  $("agent").textContent = typeof g.title === "string" ? g.title : "Goal";
  $("status").textContent = `${g.state} · revision ${g.revision}`;
  $("detail").textContent = typeof g.note === "string" && g.note ? g.note : "no checkpoint yet";
  $("endpoint").textContent = o.stalled ? `stalled since ${o.lastMeaningfulWorkAt}; its controller was woken` : "";
  const steps = $("steps");
  steps.replaceChildren();
  for (const s of Array.isArray(g.plan) ? g.plan : []) {
    const li = document.createElement("li");
    li.textContent = `${s.title} (${s.status})`;
    li.dataset.status = s.status;
    steps.append(li);
  }
}

async function observe() {
  try {
    const r = await app.callServerTool({ name: "goal_plan_observe", arguments: { goalId } });
    if (r.isError) {
      $("status").textContent = (r.structuredContent && r.structuredContent.message) || "refused";
    } else {
      render(r.structuredContent || {});
    }
  } catch (e) {
    $("status").textContent = `could not reach the server: ${e.message}`;
  } finally {
    clearTimeout(timer);
    timer = setTimeout(observe, document.visibilityState === "hidden" ? HIDDEN_OBSERVE_MS : OBSERVE_MS);
  }
}

app.ontoolresult = (result) => {
  const s = result && result.structuredContent;
  if (goalId || !s || !GOAL.test(s.goalId)) return;
  goalId = s.goalId;
  observe();
};
app.onteardown = async () => {
  clearTimeout(timer);
  return {};
};
app.connect().catch((e) => {
  $("status").textContent = `could not connect to the host: ${e.message}`;
});
