# The IR nodes as extension types (Cython's pure Python mode augments ir.py with this file):
# lowering cimports them and reads their fields as struct members.

cdef class Bytes:
    cdef readonly tuple ranges
    cdef readonly bint whitespace
    cdef object _hash


cdef class _Items:
    cdef readonly tuple items
    cdef object _hash


cdef class Seq(_Items):
    pass


cdef class Alt(_Items):
    pass


cdef class Ref:
    cdef readonly str name
    cdef object _hash


cdef class Repeat:
    cdef readonly object item, min, max
    cdef object _hash


cdef class Except:
    cdef readonly object item
    cdef readonly tuple words
    cdef object _hash
