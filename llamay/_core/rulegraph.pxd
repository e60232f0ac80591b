cdef tuple rule_graph(dict rules, root)
