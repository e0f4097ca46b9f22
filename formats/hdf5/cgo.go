package hdf5

// The calls gonum does not wrap (file creation properties, dataset offsets,
// half floats) go through cgo here, on the ids of gonum's objects.

// #cgo pkg-config: hdf5
// #include <stdlib.h>
// #include <string.h>
// #include "hdf5.h"
//
// static hid_t prep_create(const char *name, hsize_t align) {
//     hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
//     hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
//     if (fcpl < 0 || fapl < 0) return -1;
//     // No modification times on the root group: equal input, equal bytes.
//     H5Pset_obj_track_times(fcpl, 0);
//     // Large objects start on align boundaries, so O_DIRECT reads line up.
//     H5Pset_alignment(fapl, align, align);
//     hid_t f = H5Fcreate(name, H5F_ACC_TRUNC, fcpl, fapl);
//     H5Pclose(fcpl);
//     H5Pclose(fapl);
//     return f;
// }
//
// static int prep_dcpl(hid_t p) {
//     if (H5Pset_obj_track_times(p, 0) < 0) return -1;
//     if (H5Pset_layout(p, H5D_CONTIGUOUS) < 0) return -1;
//     if (H5Pset_alloc_time(p, H5D_ALLOC_TIME_EARLY) < 0) return -1;
//     return H5Pset_fill_time(p, H5D_FILL_TIME_NEVER);
// }
//
// static int prep_float16(hid_t t) {
//     if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0) return -1;
//     if (H5Tset_size(t, 2) < 0) return -1;
//     return H5Tset_ebias(t, 15);
// }
//
// static int prep_bool(hid_t t) {
//     signed char f = 0, v = 1;
//     if (H5Tenum_insert(t, "FALSE", &f) < 0) return -1;
//     return H5Tenum_insert(t, "TRUE", &v);
// }
//
// static int prep_layout(hid_t ds) {
//     hid_t p = H5Dget_create_plist(ds);
//     if (p < 0) return -1;
//     int l = H5Pget_layout(p);
//     int nf = H5Pget_nfilters(p);
//     H5Pclose(p);
//     if (l == H5D_CONTIGUOUS && nf == 0) return 1;
//     return 0;
// }
//
// // When a library call fails, HDF5 hands its error stack to the "auto"
// // handler before returning, and gonum's clean-up calls clear it soon
// // after; so the handler keeps the innermost entry, the one that says what
// // failed (for a full disk, the sec2 driver's errno), per thread.
// // Any entry with errno 28 marks a full disk, looked for before the
// // description is cut to size (a long path can push it past the end).
// static __thread char prep_desc[512];
// static __thread int prep_nospace;
//
// static herr_t prep_walk(unsigned n, const H5E_error2_t *e, void *data) {
//     if (e->desc != NULL) {
//         if (strstr(e->desc, "errno = 28,") != NULL) prep_nospace = 1;
//         strncpy(prep_desc, e->desc, sizeof prep_desc - 1);
//         prep_desc[sizeof prep_desc - 1] = 0;
//     }
//     return 0;
// }
//
// static herr_t prep_auto(hid_t stack, void *data) {
//     H5Ewalk2(stack, H5E_WALK_DOWNWARD, prep_walk, NULL);
//     return 0;
// }
//
// static void prep_errors_on(void) {
//     prep_desc[0] = 0;
//     prep_nospace = 0;
//     H5Eset_auto2(H5E_DEFAULT, prep_auto, NULL);
// }
//
// // prep_take_desc hands over the last failure's description, and
// // whether the disk was full, once, so that a caller wrapping an error
// // twice adds them once.
// static int prep_take_desc(char *dst, size_t n) {
//     strncpy(dst, prep_desc, n - 1);
//     dst[n - 1] = 0;
//     prep_desc[0] = 0;
//     int full = prep_nospace;
//     prep_nospace = 0;
//     return full;
// }
//
// // prep_fd returns the descriptor of file f, which prep opens with the
// // sec2 driver, the default; -1 for any other driver.
// static int prep_fd(hid_t f) {
//     hid_t fapl = H5Fget_access_plist(f);
//     if (fapl < 0) return -1;
//     hid_t drv = H5Pget_driver(fapl);
//     H5Pclose(fapl);
//     void *h = NULL;
//     if (drv != H5FD_SEC2 || H5Fget_vfd_handle(f, H5P_DEFAULT, &h) < 0 || h == NULL) return -1;
//     return *(int *)h;
// }
//
// static int prep_open_files(void) {
//     return (int)H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_FILE);
// }
//
// // prep_str_attr writes value as a scalar attribute of loc, a
// // variable-length UTF-8 string: h5py reads those as str, and
// // fixed-length ones, whatever their character set, as bytes.
// static int prep_str_attr(hid_t loc, const char *name, const char *value) {
//     hid_t t = H5Tcopy(H5T_C_S1), s = -1, a = -1;
//     int rc = -1;
//     if (t < 0) return -1;
//     if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) goto out;
//     if ((s = H5Screate(H5S_SCALAR)) < 0) goto out;
//     if ((a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT)) < 0) goto out;
//     if (H5Awrite(a, t, &value) < 0) goto out;
//     rc = 0;
// out:
//     if (a >= 0 && H5Aclose(a) < 0) rc = -1;
//     if (s >= 0) H5Sclose(s);
//     H5Tclose(t);
//     return rc;
// }
//
// // prep_str_list_attr writes values[0..n) as a one-dimensional attribute
// // of loc, variable-length UTF-8 strings: h5py reads an array of str.
// static int prep_str_list_attr(hid_t loc, const char *name, const char **values, hsize_t n) {
//     hid_t t = H5Tcopy(H5T_C_S1), s = -1, a = -1;
//     int rc = -1;
//     if (t < 0) return -1;
//     if (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) goto out;
//     if ((s = H5Screate_simple(1, &n, NULL)) < 0) goto out;
//     if ((a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT)) < 0) goto out;
//     if (H5Awrite(a, t, values) < 0) goto out;
//     rc = 0;
// out:
//     if (a >= 0 && H5Aclose(a) < 0) rc = -1;
//     if (s >= 0) H5Sclose(s);
//     H5Tclose(t);
//     return rc;
// }
//
// // prep_read_str_list reads the one-dimensional variable-length string
// // attribute a into *out, n strings to free() with the array; -2 when a
// // is not one.
// static int prep_read_str_list(hid_t a, char ***out, hsize_t *n) {
//     hid_t ft = H5Aget_type(a), s = H5Aget_space(a), mt = -1;
//     char **v = NULL;
//     int rc = -2;
//     *out = NULL;
//     *n = 0;
//     if (ft < 0 || s < 0) { rc = -1; goto out; }
//     if (H5Tget_class(ft) != H5T_STRING || H5Tis_variable_str(ft) <= 0) goto out;
//     if (H5Sget_simple_extent_ndims(s) != 1) goto out;
//     if (H5Sget_simple_extent_dims(s, n, NULL) < 0) { rc = -1; goto out; }
//     rc = -1;
//     if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0) goto out;
//     if (H5Tset_cset(mt, H5Tget_cset(ft)) < 0) goto out;
//     if ((v = calloc(*n + 1, sizeof *v)) == NULL) goto out;
//     if (H5Aread(a, mt, v) < 0) { free(v); goto out; }
//     for (hsize_t i = 0; i < *n; i++) {
//         char *c = strdup(v[i] != NULL ? v[i] : "");
//         H5free_memory(v[i]);
//         v[i] = c;
//     }
//     *out = v;
//     rc = 0;
// out:
//     if (mt >= 0) H5Tclose(mt);
//     if (s >= 0) H5Sclose(s);
//     if (ft >= 0) H5Tclose(ft);
//     return rc;
// }
//
// // prep_read_str reads the scalar string attribute a, variable- or
// // fixed-length (shards of earlier versions), into *out, a NUL-terminated
// // copy for free().
// static int prep_read_str(hid_t a, char **out) {
//     hid_t ft = H5Aget_type(a), mt = -1;
//     int rc = -1;
//     if (ft < 0) return -1;
//     if (H5Tget_class(ft) != H5T_STRING) goto out;
//     if (H5Tis_variable_str(ft) > 0) {
//         char *v = NULL;
//         // The library converts no character set into another.
//         if ((mt = H5Tcopy(H5T_C_S1)) < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0) goto out;
//         if (H5Tset_cset(mt, H5Tget_cset(ft)) < 0) goto out;
//         if (H5Aread(a, mt, &v) < 0) goto out;
//         *out = strdup(v != NULL ? v : "");
//         H5free_memory(v);
//     } else {
//         size_t n = H5Tget_size(ft);
//         if ((*out = calloc(n + 1, 1)) == NULL) goto out;
//         if (H5Aread(a, ft, *out) < 0) {
//             free(*out);
//             goto out;
//         }
//     }
//     rc = *out != NULL ? 0 : -1;
// out:
//     if (mt >= 0) H5Tclose(mt);
//     H5Tclose(ft);
//     return rc;
// }
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"gonum.org/v1/hdf5"
)

// alignment is the boundary datasets start on: the O_DIRECT block size.
const alignment = 4096

func createFile(name string) (int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	id := C.prep_create(cname, alignment)
	if id < 0 {
		return 0, libError(fmt.Errorf("create %s", name))
	}
	return int64(id), nil
}

func closeFile(id int64) error {
	if C.H5Fclose(C.hid_t(id)) < 0 {
		return libError(errors.New("close hdf5 file"))
	}
	return nil
}

// closeFiles closes the two handles a writer holds on one file: f,
// gonum's, then fid, prep's (see write). Closing f flushes the file, as
// fid still shares it; when that flush fails (a full disk) the library
// keeps f open, and with it the descriptor, so the space of the temp
// file the caller removes would stay taken until the process exits. The
// descriptor is then pointed at an anonymous memory file, where closing
// f again can flush and let go. (The first retry's flush empties the
// cache into the memory file but fails all the same, as the failed flush
// left the cache's list of dirty entries on; the next one lets go.
// Leaving f open would also keep the temp file's inode number taken in
// the library, which refuses to create a file that reuses it: "unable to
// truncate a file which is already open".)
func closeFiles(f *hdf5.File, fid int64) error {
	var err error
	if f != nil {
		id := C.hid_t(f.ID())
		if err = libError(f.Close()); err != nil && discard(fid) == nil {
			for i := 0; i < 3 && C.H5Iis_valid(id) > 0; i++ {
				C.H5Fclose(id)
			}
			takeDesc() // what the retries said is not news
		}
	}
	if fid != 0 {
		if cerr := closeFile(fid); err == nil {
			err = cerr
		}
	}
	return err
}

// discard moves file fid's descriptor onto an anonymous memory file.
func discard(fid int64) error {
	fd := int(C.prep_fd(C.hid_t(fid)))
	if fd < 0 {
		return errors.New("no descriptor")
	}
	m, err := unix.MemfdCreate("prep-discard", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(m)
	return unix.Dup3(m, fd, unix.O_CLOEXEC)
}

// libMu serializes calls into the library: its thread-safe build holds one
// global lock anyway, and a writer's sequence of calls (create, open twice,
// write, close) must not interleave with another's.
var libMu sync.Mutex

// lockLib takes the library and pins the goroutine to its OS thread: HDF5
// keeps the error stack (and its printing switch) per thread, and libError
// must read the stack of the thread the failed call ran on.
func lockLib() {
	libMu.Lock()
	runtime.LockOSThread()
	// The library would print its whole error stack on stderr; libError
	// turns the part that matters into the returned error instead.
	C.prep_errors_on()
}

func unlockLib() {
	runtime.UnlockOSThread()
	libMu.Unlock()
}

// libError adds what the library said about its last failure (on this
// thread, since lockLib) to err, once, and marks a full disk as
// syscall.ENOSPC so callers can say what to do.
func libError(err error) error {
	if err == nil {
		return nil
	}
	desc, full := takeDesc()
	if full {
		return fmt.Errorf("%w: %w", err, syscall.ENOSPC)
	}
	if desc == "" {
		return err
	}
	// The sec2 driver's descriptions run over several lines with a time
	// stamp; the first line is what failed.
	desc, _, _ = strings.Cut(desc, "\n")
	return fmt.Errorf("%w: %s", err, strings.TrimRight(desc, ", "))
}

// takeDesc returns, and clears, the description of the last failure on
// this thread and whether it was a full disk.
func takeDesc() (desc string, full bool) {
	var buf [512]C.char
	full = C.prep_take_desc(&buf[0], C.size_t(len(buf))) != 0
	return C.GoString(&buf[0]), full
}

// openFiles counts the files the library holds open (for tests: none
// may stay open after a failed write).
func openFiles() int {
	lockLib()
	defer unlockLib()
	return int(C.prep_open_files())
}

// writeStringAttr writes value as a scalar, variable-length UTF-8 string
// attribute of the object id (h5py: str).
func writeStringAttr(id int64, name, value string) error {
	if strings.IndexByte(value, 0) >= 0 {
		return fmt.Errorf("string attribute %s holds a NUL byte", name)
	}
	cname, cvalue := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(cvalue))
	if C.prep_str_attr(C.hid_t(id), cname, cvalue) < 0 {
		return libError(fmt.Errorf("write string attribute %s", name))
	}
	return nil
}

// writeStringListAttr writes values as a one-dimensional attribute of
// variable-length UTF-8 strings of the object id (h5py: an array of str,
// bytes that are not UTF-8 decoded with surrogateescape).
func writeStringListAttr(id int64, name string, values []string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	cvalues := make([]*C.char, len(values)+1) // +1: a valid pointer for no values
	for i, v := range values {
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("string attribute %s: entry %d holds a NUL byte", name, i)
		}
		cvalues[i] = C.CString(v)
		defer C.free(unsafe.Pointer(cvalues[i]))
	}
	if C.prep_str_list_attr(C.hid_t(id), cname, &cvalues[0], C.hsize_t(len(values))) < 0 {
		return libError(fmt.Errorf("write string attribute %s", name))
	}
	return nil
}

// readStringListAttr reads the one-dimensional variable-length string
// attribute id that writeStringListAttr writes.
func readStringListAttr(id int64) ([]string, error) {
	var (
		out **C.char
		n   C.hsize_t
	)
	switch C.prep_read_str_list(C.hid_t(id), &out, &n) {
	case 0:
	case -2:
		return nil, errors.New("not a list of variable-length strings")
	default:
		return nil, libError(errors.New("not a readable list of strings"))
	}
	cs := unsafe.Slice(out, int(n))
	list := make([]string, n)
	for i, c := range cs {
		list[i] = C.GoString(c)
		C.free(unsafe.Pointer(c))
	}
	C.free(unsafe.Pointer(out))
	return list, nil
}

// hasAttr reports whether the object id has an attribute name.
func hasAttr(id int64, name string) (bool, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	switch r := C.H5Aexists(C.hid_t(id), cname); {
	case r > 0:
		return true, nil
	case r == 0:
		return false, nil
	}
	return false, libError(fmt.Errorf("look for attribute %s", name))
}

// readStringAttr reads the scalar string attribute id, variable- or
// fixed-length.
func readStringAttr(id int64) (string, error) {
	var out *C.char
	if C.prep_read_str(C.hid_t(id), &out) < 0 {
		return "", libError(errors.New("not a readable string"))
	}
	defer C.free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

func datasetCreatePlist() (*hdf5.PropList, error) {
	p, err := hdf5.NewPropList(hdf5.P_DATASET_CREATE)
	if err != nil {
		return nil, err
	}
	if C.prep_dcpl(C.hid_t(p.ID())) < 0 {
		p.Close()
		return nil, fmt.Errorf("hdf5: set dataset properties")
	}
	return p, nil
}

// datasetOffset returns where a contiguous dataset's bytes start in the file.
func datasetOffset(ds *hdf5.Dataset) int64 {
	off := C.H5Dget_offset(C.hid_t(ds.ID()))
	if off == C.HADDR_UNDEF {
		return -1
	}
	return int64(off)
}

func storageSize(ds *hdf5.Dataset) int64 {
	return int64(C.H5Dget_storage_size(C.hid_t(ds.ID())))
}

// isPlain reports whether a dataset is contiguous and unfiltered, so plain
// reads at its offset return its elements.
func isPlain(ds *hdf5.Dataset) bool { return C.prep_layout(C.hid_t(ds.ID())) == 1 }

func typeInfo(t *hdf5.Datatype) (class int, size int, signed bool, bigEndian bool) {
	id := C.hid_t(t.ID())
	class = int(C.H5Tget_class(id))
	size = int(C.H5Tget_size(id))
	if C.H5Tget_class(id) == C.H5T_INTEGER {
		signed = C.H5Tget_sign(id) == C.H5T_SGN_2
	}
	bigEndian = C.H5Tget_order(id) == C.H5T_ORDER_BE
	return
}

const (
	classInteger  = int(C.H5T_INTEGER)
	classFloat    = int(C.H5T_FLOAT)
	classString   = int(C.H5T_STRING)
	classCompound = int(C.H5T_COMPOUND)
	classEnum     = int(C.H5T_ENUM)
)

// newFloat16 builds IEEE half precision, which HDF5 1.10 does not predefine;
// h5py reads it as float16.
func newFloat16() (*hdf5.Datatype, error) {
	t, err := hdf5.T_IEEE_F32LE.Copy()
	if err != nil {
		return nil, err
	}
	if C.prep_float16(C.hid_t(t.ID())) < 0 {
		t.Close()
		return nil, fmt.Errorf("hdf5: create float16 type")
	}
	return t, nil
}

// newBool builds the enum h5py uses for numpy bool.
func newBool() (*hdf5.Datatype, error) {
	t, err := hdf5.CreateDatatype(hdf5.T_ENUM, 1)
	if err != nil {
		return nil, err
	}
	if C.prep_bool(C.hid_t(t.ID())) < 0 {
		t.Close()
		return nil, fmt.Errorf("hdf5: create bool type")
	}
	return t, nil
}
