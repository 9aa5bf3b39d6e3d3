// The model's side of --numa (kernels/threads/placement.h): every weight
// matrix's pages asked for on the nodes whose team members read its rows.
#pragma once

#include "runtime/model.h"

namespace qkv {

// Asks for each weight matrix of m (weight_matrices) to be placed by rows
// (place_rows); nothing without a distribute or isolate placement or without
// libnuma. Call it after lay_out_weights, which moves matrices into new
// memory. Returns the page ranges asked for.
int place_weights(const Model& m);

}  // namespace qkv
