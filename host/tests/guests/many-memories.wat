;; Hostile guest: a second core module with its own linear memory beside its agent's — 2
;; memories, over the nano tier's 1 (small allows 2). The host refuses it before instantiating.
;;
;; Written as a component in the text format: no Rust toolchain emits such a component on
;; purpose. It exports the world's `resume` and imports nothing, which the `agent` world allows.
(component
  (core module $hoard (memory 1))
  ;; The agent: `resume` returns result::ok (a zeroed discriminant at offset 16).
  (core module $m
    (memory (export "memory") 1)
    (func (export "resume") (result i32) (i32.const 16))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $i (instantiate $m))
  (core instance (instantiate $hoard))
  (func (export "resume") (result (result (error string)))
    (canon lift (core func $i "resume") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))))
