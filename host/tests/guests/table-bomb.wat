;; Hostile guest: grows its table by 1,000 elements at a time until the host refuses.
;;
;; Written as a component in the text format because stable Rust cannot emit `table.grow`.
;; It exports the world's `resume` and imports nothing, which the `agent` world allows.
(component
  (core module $m
    (table $t 1 funcref)
    (memory (export "memory") 1)
    (func (export "resume") (result i32)
      (loop $grow
        (br_if $grow
          (i32.ne (table.grow $t (ref.null func) (i32.const 1000)) (i32.const -1))))
      ;; Growth was refused without a trap: report it as result::err("") at offset 16.
      (i32.store (i32.const 16) (i32.const 1))
      (i32.store (i32.const 20) (i32.const 0))
      (i32.store (i32.const 24) (i32.const 0))
      (i32.const 16))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
  (core instance $i (instantiate $m))
  (func (export "resume") (result (result (error string)))
    (canon lift (core func $i "resume") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))))
