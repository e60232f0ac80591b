# The schema compiler's pass 2 as an extension type (Cython's pure Python mode augments
# compiler.py with this file): its state is read and written per subschema, as struct members.

cdef class _Compiler:
    cdef object grammar, caps, limits, algebra, notes, flats, shapes, refs, unguarded, strings, structure
    cdef bint closed_objects
    cdef double deadline
    cdef int deepest, rules, depth

