"""The Cython core: automaton, vocabulary trie, matcher, mask cache and bitmask kernels."""
