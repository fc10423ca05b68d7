;; Hostile guest: imports `wasi:keyvalue/store`, which world `agent` does not offer and the
;; host does not link. Registration refuses it, naming the import.
;;
;; Written as a component in the text format; the import is an empty instance, as the check is
;; on the name, before any type is compared.
(component
  (import "wasi:keyvalue/store@0.2.0-draft" (instance))
  ;; The agent: `resume` returns result::ok (a zeroed discriminant at offset 16).
  (core module $m
    (memory (export "memory") 1)
    (func (export "resume") (result i32) (i32.const 16))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $i (instantiate $m))
  (func (export "resume") (result (result (error string)))
    (canon lift (core func $i "resume") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))))
