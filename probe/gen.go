package probe

//go:generate go tool bpf2go -tags linux -target amd64 -type handle_key -type alloc_info -type site_key -type site_stats -type stack -type exec_range -type range_ctl -type range_miss -type alloc_kind -type stat_index -type stack_flag -type range_flag -type unwind_row -type unwind_cfa -type unwind_rbp -type alloc_fn -type jvm_heap -type jvm_layout -type zwindow -type slot_state -type site_slot leak ../ebpf/leakscope.bpf.c -- -I../ebpf -I../ebpf/include
