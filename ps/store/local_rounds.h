// LocalRounds: local:H's policy, the trainers' pseudo-gradients averaged
// as their rounds end and applied with the shard's outer optimizer.
#ifndef SPOTPS_PS_STORE_LOCAL_ROUNDS_H_
#define SPOTPS_PS_STORE_LOCAL_ROUNDS_H_

#include "ps/store/averaged_updates.h"

namespace spotps {

// local:H: each trainer's round ends in one push of its pseudo-gradient,
// averaged like "fresh" pushes. An update that holds fewer pushes than the
// k it waited for applies their sum / k rather than their mean, so a
// trainer whose round ended apart from the others' moves the weights by
// its 1/k share of a round, as it would inside the round's mean; the outer
// SGD momentum steps by that share too, so a round split into several
// updates carries the momentum about as far as one.
class LocalRounds : public AveragedUpdates {
 public:
  using AveragedUpdates::AveragedUpdates;

 protected:
  float ShareOfK(uint32_t count, size_t k) const override;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_LOCAL_ROUNDS_H_
