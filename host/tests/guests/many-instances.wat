;; Hostile guest: 17 instances of an empty core module beside its agent's — 18 core instances,
;; over the nano tier's 16 (small allows 32). The host refuses it before instantiating.
;;
;; Written as a component in the text format: no Rust toolchain emits such a component on
;; purpose. It exports the world's `resume` and imports nothing, which the `agent` world allows.
(component
  (core module $empty)
  ;; The agent: `resume` returns result::ok (a zeroed discriminant at offset 16).
  (core module $m
    (memory (export "memory") 1)
    (func (export "resume") (result i32) (i32.const 16))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $i (instantiate $m))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (core instance (instantiate $empty))
  (func (export "resume") (result (result (error string)))
    (canon lift (core func $i "resume") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))))
