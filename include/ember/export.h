/* EMBER_API: the visibility of ember's public symbols, shared by ember.hpp and ember.h (one
 * definition, so either header may come first). Plain preprocessor, valid C and C++. */
#ifndef EMBER_EXPORT_H
#define EMBER_EXPORT_H

#if defined(_WIN32) && defined(EMBER_BUILDING_SHARED)
#define EMBER_API __declspec(dllexport)
#elif defined(_WIN32) && defined(EMBER_SHARED)
#define EMBER_API __declspec(dllimport)
#elif defined(__GNUC__)
#define EMBER_API __attribute__((visibility("default")))
#else
#define EMBER_API
#endif

#endif /* EMBER_EXPORT_H */
