// Metal's <metal_type_traits>, numeric_limits, as_type and array (see mps_shim.h).
// Metal's is_floating_point / is_integral are true for vectors of such elements too (hence
// c10's is_scalar_floating_point_v); half and bfloat are floating point.
#pragma once

// as_type<T>(x): the same bits read as another type of the same size. A Metal builtin,
// callable unqualified from any namespace (c10's float8.h calls it inside c10::metal::
// detail), hence global, and in metal:: for the qualified spelling.
template <typename T, typename U>
constexpr T as_type(U from) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs types of the same size");
  return __builtin_bit_cast(T, from);
}

namespace metal {

using std::add_const_t;
using std::conditional;
using std::conditional_t;
using std::decay_t;
using std::declval;
using std::enable_if;
using std::enable_if_t;
using std::false_type;
using std::integral_constant;
using std::is_const_v;
using std::is_pointer_v;
using std::is_same;
using std::is_same_v;
using std::is_void_v;
using std::remove_const_t;
using std::remove_cv_t;
using std::remove_reference_t;
using std::true_type;

namespace detail_traits {
template <typename T>
struct element {
  using type = T;
};
template <typename T, unsigned N>
struct element<vec<T, N>> {
  using type = T;
};
template <typename T>
constexpr bool scalar_float_v = std::is_floating_point_v<T> || std::is_same_v<T, _Float16> ||
    std::is_same_v<T, bfloat>;
} // namespace detail_traits

template <typename T>
struct is_vector : is_vec<remove_cv_t<T>> {};
template <typename T>
constexpr bool is_vector_v = is_vector<T>::value;

template <typename T>
struct is_floating_point
    : integral_constant<
          bool,
          detail_traits::scalar_float_v<
              typename detail_traits::element<remove_cv_t<T>>::type>> {};
template <typename T>
constexpr bool is_floating_point_v = is_floating_point<T>::value;

template <typename T>
struct is_integral
    : integral_constant<
          bool,
          std::is_integral_v<typename detail_traits::element<remove_cv_t<T>>::type>> {};
template <typename T>
constexpr bool is_integral_v = is_integral<T>::value;

template <typename T>
struct is_arithmetic : integral_constant<bool, is_integral_v<T> || is_floating_point_v<T>> {};
template <typename T>
constexpr bool is_arithmetic_v = is_arithmetic<T>::value;

template <typename T>
struct is_scalar
    : integral_constant<
          bool,
          !is_vector_v<T> && (is_arithmetic_v<T> || std::is_scalar_v<remove_cv_t<T>>)> {};
template <typename T>
constexpr bool is_scalar_v = is_scalar<T>::value;

template <typename T>
struct is_signed
    : integral_constant<
          bool,
          std::is_signed_v<typename detail_traits::element<remove_cv_t<T>>::type> ||
              detail_traits::scalar_float_v<
                  typename detail_traits::element<remove_cv_t<T>>::type>> {};
template <typename T>
constexpr bool is_signed_v = is_signed<T>::value;

template <typename T>
struct is_unsigned
    : integral_constant<
          bool,
          std::is_unsigned_v<typename detail_traits::element<remove_cv_t<T>>::type>> {};
template <typename T>
constexpr bool is_unsigned_v = is_unsigned<T>::value;

template <typename T>
struct make_unsigned : std::make_unsigned<T> {};
template <typename T>
using make_unsigned_t = typename make_unsigned<T>::type;
template <typename T>
struct make_signed : std::make_signed<T> {};
template <typename T>
using make_signed_t = typename make_signed<T>::type;

template <typename T>
struct make_scalar {
  using type = typename detail_traits::element<remove_cv_t<T>>::type;
};
template <typename T>
using make_scalar_t = typename make_scalar<T>::type;

template <typename T>
struct vec_elements : integral_constant<int, 1> {};
template <typename T, unsigned N>
struct vec_elements<vec<T, N>> : integral_constant<int, N> {};

// std::array's interface, and element access on an array in device memory (a parameter
// struct in a `device` buffer holds one: volatile, see mps_shim.h)
template <typename T, size_t N>
struct array {
  T elems[N];
  constexpr T& operator[](size_t i) {
    return elems[i];
  }
  constexpr const T& operator[](size_t i) const {
    return elems[i];
  }
  volatile T& operator[](size_t i) volatile {
    return elems[i];
  }
  const volatile T& operator[](size_t i) const volatile {
    return elems[i];
  }
  static constexpr size_t size() {
    return N;
  }
  constexpr T* data() {
    return elems;
  }
  constexpr const T* data() const {
    return elems;
  }
  constexpr T* begin() {
    return elems;
  }
  constexpr const T* begin() const {
    return elems;
  }
  constexpr T* end() {
    return elems + N;
  }
  constexpr const T* end() const {
    return elems + N;
  }
};

// ---- numeric_limits: std's, with half and bfloat filled in -------------------------------
template <typename T>
struct numeric_limits : std::numeric_limits<T> {};

template <>
struct numeric_limits<_Float16> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int max_exponent = 16;
  static constexpr _Float16 min() {
    return _Float16(0x1p-14f);
  }
  static constexpr _Float16 max() {
    return _Float16(65504.0f);
  }
  static constexpr _Float16 lowest() {
    return _Float16(-65504.0f);
  }
  static constexpr _Float16 epsilon() {
    return _Float16(0x1p-10f);
  }
  static constexpr _Float16 infinity() {
    return _Float16(__builtin_inff());
  }
  static constexpr _Float16 quiet_NaN() {
    return _Float16(__builtin_nanf(""));
  }
  static constexpr _Float16 denorm_min() {
    return _Float16(0x1p-24f);
  }
};

template <>
struct numeric_limits<bfloat> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int max_exponent = 128;
  static constexpr bfloat min() {
    return mps_shim::bfloat_from_bits(0x0080);
  }
  static constexpr bfloat max() {
    return mps_shim::bfloat_from_bits(0x7f7f);
  }
  static constexpr bfloat lowest() {
    return mps_shim::bfloat_from_bits(0xff7f);
  }
  static constexpr bfloat epsilon() {
    return mps_shim::bfloat_from_bits(0x3c00);
  }
  static constexpr bfloat infinity() {
    return mps_shim::bfloat_from_bits(0x7f80);
  }
  static constexpr bfloat quiet_NaN() {
    return mps_shim::bfloat_from_bits(0x7fc0);
  }
  static constexpr bfloat denorm_min() {
    return mps_shim::bfloat_from_bits(0x0001);
  }
};

// a vector's limits are its element's, in every component (c10's complex logaddexp reads
// numeric_limits<float2>::infinity().x)
template <typename T, unsigned N>
struct numeric_limits<vec<T, N>> : numeric_limits<T> {
  static constexpr vec<T, N> min() {
    return vec<T, N>(numeric_limits<T>::min());
  }
  static constexpr vec<T, N> max() {
    return vec<T, N>(numeric_limits<T>::max());
  }
  static constexpr vec<T, N> lowest() {
    return vec<T, N>(numeric_limits<T>::lowest());
  }
  static constexpr vec<T, N> epsilon() {
    return vec<T, N>(numeric_limits<T>::epsilon());
  }
  static constexpr vec<T, N> infinity() {
    return vec<T, N>(numeric_limits<T>::infinity());
  }
  static constexpr vec<T, N> quiet_NaN() {
    return vec<T, N>(numeric_limits<T>::quiet_NaN());
  }
  static constexpr vec<T, N> denorm_min() {
    return vec<T, N>(numeric_limits<T>::denorm_min());
  }
};

using ::as_type;

} // namespace metal
