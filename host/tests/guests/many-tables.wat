;; Hostile guest: five instances of a core module with one table each — 5 tables, over the
;; nano tier's 4 (small allows 8). The host refuses it before instantiating.
;;
;; Written as a component in the text format: no Rust toolchain emits such a component on
;; purpose. It exports the world's `resume` and imports nothing, which the `agent` world allows.
(component
  (core module $t (table 1 funcref))
  ;; The agent: `resume` returns result::ok (a zeroed discriminant at offset 16).
  (core module $m
    (memory (export "memory") 1)
    (func (export "resume") (result i32) (i32.const 16))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $i (instantiate $m))
  (core instance (instantiate $t))
  (core instance (instantiate $t))
  (core instance (instantiate $t))
  (core instance (instantiate $t))
  (core instance (instantiate $t))
  (func (export "resume") (result (result (error string)))
    (canon lift (core func $i "resume") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))))
