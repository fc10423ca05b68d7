use super::*;

const MINUTE: Duration = Duration::from_secs(60);

fn stalls(w: &mut World) -> i64 {
    w.count("SELECT count(*) FROM attention_events WHERE kind = 'goal_workflow_stalled'")
}

/// Alice's controller agent, carried by an MCP App View (bound for an hour: the tests' span),
/// and a goal it controls.
fn setup() -> (World, Caller, Agent, AgentActor, Goal) {
    let mut w = world();
    let alice = w.alice.clone();
    let controller = w.agent(&alice);
    let k = w.key();
    let hour = crate::conversation::bounds::MAX_ENDPOINT_LEASE;
    let ep = AgentActor::of(&w.store.attach_endpoint(&alice, &controller.id, hour, &k).unwrap().value);
    let fence = format!("{APP_BINDING_PREFIX}{:032x}", 7);
    let view = AppView {
        binding: &fence,
        window: Some("window"),
    };
    w.store.bind_app_view(&alice, &ep, &view).unwrap();
    let g = w.goal(&alice, &Acting::Human, Some(&controller));
    (w, alice, controller, ep, g)
}

fn observe(w: &mut World, who: &Caller, goal: &Goal) -> Mutation<GoalPlanObservation> {
    w.store
        .observe_goal_plan(who, &Acting::Human, &goal.id, STALL_QUIET_PERIOD)
        .unwrap()
}

/// The card observes every `every` for `total`, from now; returns how many observations
/// recorded a stall.
fn watch(w: &mut World, who: &Caller, goal: &Goal, every: Duration, total: Duration) -> usize {
    let mut recorded = 0;
    let mut elapsed = Duration::ZERO;
    while elapsed < total {
        w.clock.advance(every);
        elapsed += every;
        if observe(w, who, goal).state_changed {
            recorded += 1;
        }
    }
    recorded
}

#[test]
fn a_quiet_goal_under_observation_gets_one_stalled_attention_and_one_wake_whatever_the_refreshes() {
    let (mut w, alice, controller, ep, g) = setup();
    let first = observe(&mut w, &alice, &g);
    assert_eq!(first.value.observed_since, first.value.last_meaningful_work_at);
    assert_eq!(first.value.goal.plan.len(), 1);
    // One second short of the quiet period: nothing.
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 4 * MINUTE), 0);
    w.clock.advance(MINUTE - Duration::from_secs(1));
    assert!(!observe(&mut w, &alice, &g).state_changed);
    assert_eq!(stalls(&mut w), 0);
    // At the quiet period: one attention and one wake for the controller.
    w.clock.advance(Duration::from_secs(1));
    let stalled = observe(&mut w, &alice, &g);
    assert!(stalled.state_changed);
    assert_eq!(stalled.woken, vec![controller.id.clone()]);
    let event = stalled.value.stalled.clone().expect("the stalled attention");
    assert_eq!(event.kind, AttentionKind::GoalWorkflowStalled);
    assert_eq!(event.epoch, Some(stalled.value.last_meaningful_work_at));
    assert_eq!((event.task_id.as_deref(), event.task_state), (None, None));
    assert_eq!(event.target_agent_id.as_deref(), Some(controller.id.as_str()));
    let wake = w.open_wake(&ep).expect("the controller's wake");
    assert_eq!(wake.origin, WakeOrigin::AttentionEvent(event.id.clone()));
    // Refreshes, several per second and for an hour: nothing more.
    assert_eq!(
        watch(&mut w, &alice, &g, Duration::from_millis(300), Duration::from_secs(3)),
        0
    );
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 4 * MINUTE), 0);
    let again = observe(&mut w, &alice, &g);
    assert_eq!(again.value.stalled.as_ref().map(|e| &e.id), Some(&event.id));
    assert_eq!(stalls(&mut w), 1);
    assert_eq!(w.causes("attention_event", &event.id), 1);
    // The controller reads it through its own endpoint.
    let read = w
        .store
        .get_attention_event(&alice, &Acting::Agent(ep.clone()), &event.id)
        .unwrap();
    assert_eq!(read, event);
    assert!(
        crate::conversation::delegation::check::violations(&w.store.autocommit())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn new_meaningful_work_opens_a_later_epoch_and_only_it() {
    let (mut w, alice, _controller, _ep, g) = setup();
    observe(&mut w, &alice, &g);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 5 * MINUTE), 1);
    // A checkpoint is meaningful work: a new epoch, quiet again from it.
    let k = w.key();
    let cp = GoalCheckpoint {
        goal: g.id.clone(),
        expected_revision: 1,
        plan: g.plan.clone(),
        note: "half way".into(),
    };
    w.store.checkpoint_goal(&alice, &Acting::Human, &cp, &k).unwrap();
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 4 * MINUTE), 0);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, MINUTE), 1);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 30 * MINUTE), 0);
    let epochs = w.count("SELECT count(DISTINCT epoch) FROM attention_events WHERE kind = 'goal_workflow_stalled'");
    assert_eq!((stalls(&mut w), epochs), (2, 2));
    assert!(
        crate::conversation::delegation::check::violations(&w.store.autocommit())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_task_of_the_goal_is_meaningful_work_and_a_running_one_keeps_it_from_stalling() {
    let (mut w, alice, _controller, _ep, g) = setup();
    let worker = w.agent(&alice);
    let worker_ep = w.attach(&alice, &worker);
    observe(&mut w, &alice, &g);
    w.clock.advance(MINUTE);
    let task = w.task(&alice, &Acting::Human, &worker, Some(&g), true);
    // Running for longer than the quiet period under observation: never stalled.
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 8 * MINUTE), 0);
    // Its end is meaningful work; five quiet minutes after it, one stall.
    w.complete(&alice, &worker_ep, &task, TaskOutcome::Succeeded, "done")
        .unwrap();
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 4 * MINUTE), 0);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 2 * MINUTE), 1);
}

#[test]
fn a_gap_in_observation_restarts_the_coverage() {
    let (mut w, alice, _controller, _ep, g) = setup();
    observe(&mut w, &alice, &g);
    // A gap of exactly the longest allowed keeps the run.
    w.clock.advance(MAX_OBSERVATION_GAP);
    let kept = observe(&mut w, &alice, &g);
    assert_eq!(kept.value.observed_since, kept.value.last_meaningful_work_at);
    // One microsecond more starts a new one.
    w.clock.advance(MAX_OBSERVATION_GAP + Duration::from_micros(1));
    let restarted = observe(&mut w, &alice, &g);
    assert!(restarted.value.observed_since > restarted.value.last_meaningful_work_at);
    // Long quiet, but watched only since the restart: the stall waits for five watched minutes.
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 4 * MINUTE), 0);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, MINUTE), 1);
}

#[test]
fn no_stall_without_an_app_carried_controller_or_for_a_closed_goal() {
    let (mut w, alice, controller, ep, g) = setup();
    // A controller carried by a push carrier (a sandbox's), not by an App.
    w.store
        .register_wake_carrier(&controller.id, &ep.endpoint, ep.generation)
        .unwrap();
    observe(&mut w, &alice, &g);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 10 * MINUTE), 0);
    // A goal without a controller.
    let orphan = w.goal(&alice, &Acting::Human, None);
    observe(&mut w, &alice, &orphan);
    assert_eq!(watch(&mut w, &alice, &orphan, MINUTE, 10 * MINUTE), 0);
    // A completed goal of an App-carried controller.
    let (mut w, alice, _controller, _ep, g) = setup();
    w.store.complete_goal(&alice, &Acting::Human, &g.id).unwrap();
    observe(&mut w, &alice, &g);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 10 * MINUTE), 0);
    assert_eq!(stalls(&mut w), 0);
}

#[test]
fn another_principal_observes_nothing_and_changes_nothing() {
    let (mut w, alice, _controller, _ep, g) = setup();
    observe(&mut w, &alice, &g);
    watch(&mut w, &alice, &g, MINUTE, 4 * MINUTE);
    w.clock.advance(MINUTE);
    let before = w.bytes();
    let bob = w.bob.clone();
    assert!(matches!(
        w.store
            .observe_goal_plan(&bob, &Acting::Human, &g.id, STALL_QUIET_PERIOD),
        Err(ConversationError::GoalNotFound(_))
    ));
    assert!(matches!(
        w.store
            .observe_goal_plan(&bob, &Acting::Human, "goal_nope", STALL_QUIET_PERIOD),
        Err(ConversationError::InvalidInput { .. })
    ));
    assert!(w.bytes() == before);
    // A read-only caller's observation is evidence too.
    let reader = Caller::new(
        CommunicationPrincipal::from_subject("account:alice").unwrap(),
        &[Scope::Read],
    );
    assert!(observe(&mut w, &reader, &g).state_changed);
}

#[test]
fn a_controller_whose_view_let_go_gets_no_stall() {
    let (mut w, alice, _controller, ep, g) = setup();
    let fence = format!("{APP_BINDING_PREFIX}{:032x}", 7);
    let view = AppView {
        binding: &fence,
        window: Some("window"),
    };
    w.store.unbind_app_view(&alice, &ep, &view).unwrap();
    observe(&mut w, &alice, &g);
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, 10 * MINUTE), 0);
    // Bound again: quiet since creation and watched all along, the next observation records it.
    w.store.bind_app_view(&alice, &ep, &view).unwrap();
    assert_eq!(watch(&mut w, &alice, &g, MINUTE, MINUTE), 1);
}

#[test]
fn an_attention_row_whose_fields_do_not_match_its_kind_fails_closed() {
    let (mut w, alice, _controller, _ep, g) = setup();
    observe(&mut w, &alice, &g);
    watch(&mut w, &alice, &g, MINUTE, 5 * MINUTE);
    let id: String = w
        .store
        .autocommit()
        .query_row("SELECT id FROM attention_events", [], |r| r.get(0))
        .unwrap();
    w.store
        .autocommit()
        .execute(
            "UPDATE attention_events SET task_state = 'succeeded' WHERE id = ?1",
            [&id],
        )
        .unwrap();
    assert!(matches!(
        w.store.get_attention_event(&alice, &Acting::Human, &id),
        Err(ConversationError::CorruptRow { .. })
    ));
}

#[test]
fn the_hosts_quiet_period_is_bounded_and_used() {
    let (mut w, alice, _controller, _ep, g) = setup();
    let before = w.bytes();
    for bad in [
        MIN_STALL_QUIET_PERIOD - Duration::from_millis(1),
        MAX_STALL_QUIET_PERIOD + Duration::from_secs(1),
    ] {
        assert!(matches!(
            w.store.observe_goal_plan(&alice, &Acting::Human, &g.id, bad),
            Err(ConversationError::InvalidInput {
                field: "quietPeriod",
                ..
            })
        ));
    }
    assert!(w.bytes() == before);
    // A host that set one minute: stalled a minute after the last work, under observation.
    let minute = |w: &mut World| {
        w.store
            .observe_goal_plan(&alice, &Acting::Human, &g.id, MINUTE)
            .unwrap()
    };
    assert!(!minute(&mut w).state_changed);
    w.clock.advance(MINUTE);
    assert!(minute(&mut w).state_changed);
    // At the bounds: accepted.
    w.store
        .observe_goal_plan(&alice, &Acting::Human, &g.id, MIN_STALL_QUIET_PERIOD)
        .unwrap();
    w.store
        .observe_goal_plan(&alice, &Acting::Human, &g.id, MAX_STALL_QUIET_PERIOD)
        .unwrap();
}
