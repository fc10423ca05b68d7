-- A host's carried endpoints by when their lease runs out: the bulk renewal of a host's leases
-- (`renew_carried_leases`, every reaper tick) reads only the endpoints due, not every agent the
-- host carries — a million parked agents cost the tick nothing while none is due.
CREATE INDEX agent_endpoints_carried_by_lease ON agent_endpoints (host_id, lease_expires_at)
    WHERE state = 'attached' AND host_held = 1 AND wake_capable = 1;
