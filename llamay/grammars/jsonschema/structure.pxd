# StructureKeys as an extension type (Cython's pure Python mode augments structure.py with this
# file): its tables are read at every node of a repeated subschema.

cdef class StructureKeys:
    cdef dict _ids, _seen
    cpdef object part(self, object item)
    cpdef object key(self, object value)
